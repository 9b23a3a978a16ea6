package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/doctor"
)

const doctorUsage = `Usage: gitfleet doctor coordinator|full|partial [--server URL] [flags of the role]

Checks this machine for the role with the role's own flags (or --config):
git and its features, --data, the coordinators, the full node's HTTP
(--server, a full node's default: --public-url or --http) and the clock's
skew against it, the TLS files and the tokens. Exit status 1 if a check fails.
`

// runDoctor is the wiring of gitfleet doctor: the checks are internal/doctor.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, doctorUsage)
		return 2
	}
	role, err := doctor.ParseRole(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "gitfleet: %v\n\n%s", err, doctorUsage)
		return 2
	}
	server, rest := cutFlag(args[1:], "server")
	cfg, _, err := config.Load("gitfleet doctor "+args[0], rest)
	if err != nil {
		fmt.Fprintln(stderr, "gitfleet:", err)
		return 2
	}
	if doctor.Print(stdout, doctor.Run(ctx, doctor.FromConfig(cfg, role, server))) {
		return 1
	}
	return 0
}

// cutFlag removes the flag name ("--name v", "--name=v", one or two dashes)
// from args, before the configuration's flags are parsed, and returns its
// last value.
func cutFlag(args []string, name string) (value string, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return value, append(rest, args[i:]...)
		}
		bare := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		switch {
		case bare == name && bare != a && i+1 < len(args):
			value = args[i+1]
			i++
		case strings.HasPrefix(bare, name+"=") && bare != a:
			value = strings.TrimPrefix(bare, name+"=")
		default:
			rest = append(rest, a)
		}
	}
	return value, rest
}
