package main

import (
	"fmt"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/node"
)

// nodeLimits reads the limits on what an upstream can make a node store
// or spend.
func nodeLimits(cfg config.Config) (node.Limits, error) {
	size := func(flag, v string) (int64, error) {
		if v == "" || v == "0" {
			return 0, nil
		}
		n, err := config.ParseBytes(v)
		if err != nil {
			return 0, fmt.Errorf("--%s: %w", flag, err)
		}
		return n, nil
	}
	repo, err := size("max-repo-size", cfg.MaxRepoSize)
	if err != nil {
		return node.Limits{}, err
	}
	mem, err := size("git-memory-limit", cfg.GitMemoryLimit)
	if err != nil {
		return node.Limits{}, err
	}
	return node.Limits{MaxRepoSize: repo, MaxRefs: cfg.MaxRefs, MaxRefLength: cfg.MaxRefLength,
		GitMemory: mem, MaxTreeDepth: cfg.MaxTreeDepth}, nil
}
