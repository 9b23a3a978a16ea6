package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/schedule"
)

// nodeSchedule parses args as `gitfleet node` does and builds the node's
// scheduler from the result, as node.New does.
func nodeSchedule(t *testing.T, args ...string) (schedule.Config, error) {
	t.Helper()
	var sc schedule.Config
	err := withConfig(config.NodeCommand, args, io.Discard, io.Discard, func(cfg config.Config, _ *slog.Logger) error {
		ncfg, err := nodeConfig(cfg, t.TempDir())
		if err != nil {
			return err
		}
		sc = schedule.Config{Policy: ncfg.Policy, Budget: ncfg.Budget, Concurrency: ncfg.Fetchers,
			MaxInterval: ncfg.MaxInterval, MinInterval: ncfg.MinInterval, HostLimits: ncfg.HostLimits}
		_, err = schedule.New(sc, clock.NewFake(time.Unix(0, 0)))
		return err
	})
	return sc, err
}

func TestNodeWithOnlyAShortMaxIntervalStarts(t *testing.T) {
	sc, err := nodeSchedule(t, "--max-interval", "5s")
	if err != nil {
		t.Fatalf("gitfleet node --max-interval 5s: %v", err)
	}
	if sc.MaxInterval != 5*time.Second || sc.MinInterval <= 0 || sc.MinInterval > sc.MaxInterval {
		t.Fatalf("min %v max %v", sc.MinInterval, sc.MaxInterval)
	}
	_, err = nodeSchedule(t, "--max-interval", "5s", "--min-interval", "1m")
	if err == nil || !strings.Contains(err.Error(), "--min-interval 1m0s is longer than --max-interval 5s") {
		t.Fatalf("an explicit contradiction: err = %v", err)
	}
}
