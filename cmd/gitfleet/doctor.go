package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/doctor"
)

const doctorUsage = `Usage: gitfleet doctor coordinator|full|partial|up [--server URL] [flags of the role]

Checks this machine for the role with the role's own flags (or --config):
git and its features, --data, the catalog repository (coordinator, up), the
coordinators, the full node's HTTP (--server, a full node's and up's
default: --public-url or --http) and the clock's skew against it, the TLS
files and the tokens (up makes its own unless it shares a fleet through
--etcd). Exit status 1 if a check fails.
`

// doctorCommand is the command whose flags doctor takes for role: the
// role's own.
func doctorCommand(role doctor.Role) config.Command {
	cmd := config.NodeCommand
	switch role {
	case doctor.Coordinator:
		cmd = config.CoordinatorCommand
	case doctor.Up:
		cmd = config.UpCommand
	}
	cmd.Name = "doctor " + string(role)
	return cmd
}

// runDoctor is the wiring of gitfleet doctor: the checks are internal/doctor.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, doctorUsage)
			return 0
		}
		fmt.Fprint(stderr, doctorUsage)
		return 2
	}
	role, err := doctor.ParseRole(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "gitfleet: %v\n\n%s", err, doctorUsage)
		return 2
	}
	cmd := doctorCommand(role)
	server, rest := cutFlag(args[1:], "server")
	cfg, err := config.Load(cmd, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "%s\n  --server URL\n        the full node's HTTP base URL\n\n%s", doctorUsage, config.Help(cmd))
		return 0
	}
	var usageErr *config.UsageError
	if errors.As(err, &usageErr) {
		fmt.Fprintln(stderr, usageErr)
		return 2
	}
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
