package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAnUnsetIntervalYieldsToTheOneTheUserSet(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gitfleet.yaml")
	if err := os.WriteFile(p, []byte("max-interval: 8s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		min, max time.Duration
	}{
		{"max flag", []string{"--max-interval", "5s"}, 1250 * time.Millisecond, 5 * time.Second},
		{"max YAML", []string{"--config", p}, 2 * time.Second, 8 * time.Second},
		{"max long", []string{"--max-interval", "2h"}, time.Minute, 2 * time.Hour},
		{"max tiny", []string{"--max-interval", "3ns"}, 3, 3},
		{"min flag", []string{"--min-interval", "48h"}, 48 * time.Hour, 48 * time.Hour},
		{"both consistent", []string{"--min-interval", "2s", "--max-interval", "5s"}, 2 * time.Second, 5 * time.Second},
		{"neither", nil, Default().MinInterval, Default().MaxInterval},
	} {
		cfg, err := Load(NodeCommand, tc.args)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if cfg.MinInterval != tc.min || cfg.MaxInterval != tc.max {
			t.Errorf("%s: min %v max %v, want min %v max %v", tc.name, cfg.MinInterval, cfg.MaxInterval, tc.min, tc.max)
		}
	}
}

func TestBothIntervalsSetInContradictionIsAClearError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gitfleet.yaml")
	if err := os.WriteFile(p, []byte("min-interval: 10s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--min-interval", "10s", "--max-interval", "5s"},
		{"--config", p, "--max-interval", "5s"},
	} {
		_, err := Load(NodeCommand, args)
		if err == nil || !strings.Contains(err.Error(), "--min-interval 10s is longer than --max-interval 5s") {
			t.Errorf("%q: err = %v, want the contradiction named", args, err)
		}
	}
}
