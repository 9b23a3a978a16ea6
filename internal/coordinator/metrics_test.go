package coordinator

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/metrics/metricstest"
	"github.com/gitfleet/gitfleet/internal/placement"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

func TestCoordinatorMetricsReadTheRunningCoordinator(t *testing.T) {
	dir := t.TempDir()
	reg := metrics.NewRegistry()
	cfg := Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), JoinToken: testJoin, FullToken: testFull, Metrics: reg}
	cfg.met = newCoordMetrics(reg) // as Serve does: once per process
	if v, _ := metricstest.Value(t, reg, "gitfleet_coordinator_leader"); v != 0 {
		t.Fatalf("leader before any coordinator runs = %v", v)
	}
	c, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1.7e9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull})
	bad := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin})
	mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin})
	c.mu.Lock()
	s := newSession(c, c.nodes[full.GetNodeId()], func() {})
	s.disk = &fleetv1.Heartbeat{DiskUsedBytes: 10, DiskTotalBytes: 100}
	c.sessions[full.GetNodeId()] = s
	c.mu.Unlock()
	if _, err := c.RevokeNode(as(full), &fleetv1.RevokeNodeRequest{NodeId: bad.GetNodeId()}); err != nil {
		t.Fatal(err)
	}
	c.cfg.met.decided(placement.Decision{Kind: placement.Assign, Key: "a", Node: 2})
	c.cfg.met.decided(placement.Decision{Kind: placement.Assign, Key: "b", Node: 2, From: 3})
	for _, w := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"gitfleet_coordinator_leader", nil, 1},
		{"gitfleet_coordinator_nodes", []string{"state", "revoked"}, 1},
		{"gitfleet_coordinator_sessions", []string{"mode", "full"}, 1},
		{"gitfleet_coordinator_sessions", []string{"mode", "partial"}, 0},
		{"gitfleet_coordinator_node_disk_used_bytes", []string{"node", "1"}, 10},
		{"gitfleet_coordinator_placing", nil, 0}, // still warming up
		{"gitfleet_coordinator_repos", nil, 0},
		{"gitfleet_placement_decisions_total", []string{"kind", "assign"}, 1},
		{"gitfleet_placement_decisions_total", []string{"kind", "move"}, 1},
	} {
		if got, ok := metricstest.Value(t, reg, w.family, w.labels...); !ok || got != w.want {
			t.Errorf("%s%v = %v (present %v), want %v", w.family, w.labels, got, ok, w.want)
		}
	}
	if n, _ := metricstest.Value(t, reg, "gitfleet_store_write_duration_seconds", "role", "coordinator", "backend", "bolt", "op", "put"); n < 3 {
		t.Errorf("%v timed puts: want one for each node registered at least", n)
	}
	c.Close()
	if v, _ := metricstest.Value(t, reg, "gitfleet_coordinator_leader"); v != 0 {
		t.Errorf("leader after the coordinator closed = %v, want 0", v)
	}
}
