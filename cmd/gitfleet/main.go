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
	"syscall"

	"github.com/gitfleet/gitfleet/internal/catalog/catalogcli"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/ctl"
	"github.com/gitfleet/gitfleet/internal/redactlog"
	"github.com/gitfleet/gitfleet/internal/version"
)

const usage = `gitfleet: a mirror of many upstream git repositories, fetched by a fleet of nodes.

Usage:
  gitfleet coordinator [flags]       the public, lightweight coordinator
  gitfleet node --mode partial|full  a worker (partial) or the aggregator (full)
  gitfleet node status [--data DIR]  what a node on this machine holds, moved today, and its standing
  gitfleet up [flags]                coordinator and full node in one process
  gitfleet demo                      a self-contained demonstration (no network needed)
  gitfleet ctl repos|show|add|rm|fetch|nodes|events   the client of a full node's API
  gitfleet catalog check|diff|gen    tools for catalog maintainers
  gitfleet sim placement|schedule    simulators of placement and freshness
  gitfleet doctor coordinator|full|partial   check this machine for a role
  gitfleet version
  gitfleet help config               every setting, as a Markdown table

Run 'gitfleet <command> -h' for the flags of a command; every flag can also
be set in a YAML file given with --config.
`

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
		err = withConfig(cmd, rest, stderr, func(cfg config.Config, log *slog.Logger, _ *flag.FlagSet) error {
			return withPprof(ctx, cfg, log, func(ctx context.Context) error { return runCoordinator(ctx, cfg, log) })
		})
	case "node":
		if len(rest) > 0 && rest[0] == "status" {
			return runNodeStatus(ctx, rest[1:], stdout, stderr)
		}
		err = withConfig(cmd, rest, stderr, func(cfg config.Config, log *slog.Logger, _ *flag.FlagSet) error {
			return withPprof(ctx, cfg, log, func(ctx context.Context) error { return runNode(ctx, cfg, log) })
		})
	case "up":
		err = withConfig(cmd, rest, stderr, func(cfg config.Config, log *slog.Logger, _ *flag.FlagSet) error {
			return withPprof(ctx, cfg, log, func(ctx context.Context) error { return runUp(ctx, cfg, log) })
		})
	case "demo":
		err = withConfig(cmd, rest, stderr, func(cfg config.Config, log *slog.Logger, _ *flag.FlagSet) error {
			return runDemo(ctx, cfg, log, stdout)
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
		if len(rest) > 0 && rest[0] == "config" {
			fmt.Fprint(stdout, config.Markdown())
			return 0
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "gitfleet: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gitfleet:", err)
		return 1
	}
	return 0
}

func withConfig(name string, args []string, stderr io.Writer, f func(config.Config, *slog.Logger, *flag.FlagSet) error) error {
	cfg, fs, err := config.Load("gitfleet "+name, args)
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
	return f(cfg, log, fs)
}
