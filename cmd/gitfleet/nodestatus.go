package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/node"
)

// runNodeStatus is `gitfleet node status`: the status of the node whose
// data directory is --data (or --config's), read from the running node or
// from what it wrote when it stopped.
func runNodeStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gitfleet node status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "the node's data directory (default: --config's, or "+config.Default().Data+")")
	cfgPath := fs.String("config", "", "the node's YAML configuration file, for its data directory")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dir := *data
	if dir == "" {
		cfg, err := config.Load(config.NodeCommand, configArgs(*cfgPath))
		if err != nil {
			fmt.Fprintln(stderr, "gitfleet:", err)
			return 1
		}
		dir = cfg.Data
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintln(stderr, "gitfleet:", err)
		return 1
	}
	st, err := node.ReadStatus(ctx, dir)
	if err != nil {
		fmt.Fprintln(stderr, "gitfleet:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
		return 0
	}
	st.Write(stdout)
	return 0
}

func configArgs(path string) []string {
	if path == "" {
		return nil
	}
	return []string{"--config", path}
}
