package main

import (
	"context"
	"fmt"
	"io"

	placementsim "github.com/gitfleet/gitfleet/internal/placement/sim"
	schedulesim "github.com/gitfleet/gitfleet/internal/schedule/sim"
)

const simUsage = `Usage:
  gitfleet sim placement --keys K --nodes N [--scenario FILE] [--json]
  gitfleet sim schedule --trace FILE --budget N [--feed-budget R [--feed-batch B]] [--policy P|all] [--json]
`

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, simUsage)
		return 2
	}
	switch args[0] {
	case "placement":
		return placementsim.Main(ctx, args[1:], stdout, stderr)
	case "schedule":
		return schedulesim.Main(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "gitfleet sim: unknown simulator %q\n\n%s", args[0], simUsage)
		return 2
	}
}
