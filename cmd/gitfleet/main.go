// Command gitfleet is a mirror of many upstream git repositories, fetched by
// a fleet of volunteer nodes. One binary, three roles: see `gitfleet help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/gitfleet/gitfleet/internal/catalog/catalogcli"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/ctl"
	"github.com/gitfleet/gitfleet/internal/redactlog"
	"github.com/gitfleet/gitfleet/internal/version"
)

// usage is gitfleet's own usage; the ctl commands come from ctl itself.
var usage = `gitfleet: a mirror of many upstream git repositories, fetched by a fleet
of nodes.

Usage:
  gitfleet coordinator [flags]       the public, lightweight coordinator
  gitfleet node --mode partial|full  a worker (partial) or the aggregator (full)
  gitfleet node status [--data DIR]  what a node here holds, moved today,
                                     and its standing
  gitfleet up [flags]                coordinator and full node in one process
  gitfleet demo [flags]              a whole fleet on this machine, no network
  gitfleet ctl COMMAND               the client of a full node's API; COMMAND:
` + wrapped(strings.Join(ctl.Commands(), ", "), "                                     ") + `  gitfleet catalog check|diff|gen    tools for catalog maintainers
  gitfleet sim placement|schedule    simulators of placement and freshness
  gitfleet doctor coordinator|full|partial|up
                                     check this machine for a role
  gitfleet version
  gitfleet help [COMMAND|config]     this, a command's flags, or (config)
                                     every setting, as a Markdown table

Run 'gitfleet <command> -h' for the flags of a command; every flag can also
be set in a YAML file given with --config.
`

// wrapped is text in lines of at most 80 columns, each starting with indent.
func wrapped(text, indent string) string {
	var b, line strings.Builder
	for _, w := range strings.Fields(text) {
		if line.Len() > 0 && len(indent)+line.Len()+1+len(w) > 80 {
			b.WriteString(indent + line.String() + "\n")
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(w)
	}
	if line.Len() > 0 {
		b.WriteString(indent + line.String() + "\n")
	}
	return b.String()
}

// about is what each command that takes settings is, for its help.
var about = map[string]string{
	"coordinator": "The public, lightweight coordinator: it reads the catalog, keeps the fleet's\nmembership and decides which node fetches which repository.",
	"node":        "A node of the fleet: a worker that fetches what it is assigned (--mode\npartial), or the aggregator that holds every repository and serves git, the\nAPI and the console (--mode full).",
	"up":          "A coordinator and a full node in one process: a complete mirror on one\nmachine, which partial nodes can join later.",
	"demo":        "A whole fleet on this machine with no network: upstreams on 127.0.0.1, a\ncatalog, a coordinator, a full node and two partial nodes.",
}

// commandHelp is the help of a command that takes settings.
func commandHelp(cmd config.Command) string {
	return fmt.Sprintf("Usage: gitfleet %s [flags]\n\n%s\n\n%s\nEvery flag is also a key of the YAML file given with --config; `gitfleet help\nconfig` lists every setting with the commands that take it.\n",
		cmd.Name, about[cmd.Name], config.Help(cmd))
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "coordinator":
		err = withConfig(config.CoordinatorCommand, rest, stdout, stderr, func(cfg config.Config, log *slog.Logger) error {
			return withPprof(ctx, cfg, log, func(ctx context.Context) error { return runCoordinator(ctx, cfg, log) })
		})
	case "node":
		if len(rest) > 0 && rest[0] == "status" {
			return runNodeStatus(ctx, rest[1:], stdout, stderr)
		}
		err = withConfig(config.NodeCommand, rest, stdout, stderr, func(cfg config.Config, log *slog.Logger) error {
			return withPprof(ctx, cfg, log, func(ctx context.Context) error { return runNode(ctx, cfg, log) })
		})
	case "up":
		err = withConfig(config.UpCommand, rest, stdout, stderr, func(cfg config.Config, log *slog.Logger) error {
			return runUp(ctx, cfg, log)
		})
	case "demo":
		err = withConfig(config.DemoCommand, rest, stdout, stderr, func(cfg config.Config, log *slog.Logger) error {
			return runDemo(ctx, cfg, stdout)
		})
	case "ctl":
		return ctl.Main(ctx, rest, stdout, stderr, os.Getenv)
	case "catalog":
		return catalogcli.Main(ctx, rest, stdout, stderr)
	case "sim":
		return runSim(ctx, rest, stdout, stderr)
	case "doctor":
		return runDoctor(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "gitfleet", version.Version)
		return 0
	case "help", "-h", "--help":
		return help(rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "gitfleet: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	return exitStatus(err, stderr)
}

// help runs `gitfleet help [COMMAND|config]`.
func help(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if args[0] == "config" {
		fmt.Fprint(stdout, config.Markdown())
		return 0
	}
	for _, c := range config.Commands() {
		if c.Name == args[0] {
			fmt.Fprint(stdout, commandHelp(c))
			return 0
		}
	}
	switch args[0] {
	case "ctl", "catalog", "sim", "doctor":
		return run([]string{args[0], "-h"}, stdout, stderr)
	}
	fmt.Fprintf(stderr, "gitfleet: no help on %q\n\n%s", args[0], usage)
	return 2
}

// exitStatus prints err, if any, and returns the exit status: 2 for a
// command line the command cannot take (one line), 1 for a failure.
func exitStatus(err error, stderr io.Writer) int {
	var usageErr *config.UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usageErr):
		fmt.Fprintln(stderr, usageErr)
		return 2
	default:
		fmt.Fprintln(stderr, "gitfleet:", err)
		return 1
	}
}

// withConfig loads the settings of cmd from args and runs f with them and
// a logger; -h prints the command's help.
func withConfig(cmd config.Command, args []string, stdout, stderr io.Writer, f func(config.Config, *slog.Logger) error) error {
	cfg, err := config.Load(cmd, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, commandHelp(cmd))
		return err
	}
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(redactlog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if cfg.MemoryLimit != "" {
		limit, err := config.ParseBytes(cfg.MemoryLimit)
		if err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
		debug.SetMemoryLimit(limit)
	}
	return f(cfg, log)
}
