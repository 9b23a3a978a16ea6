package fullnode

import (
	"testing"

	"github.com/gitfleet/gitfleet/internal/metrics/metricstest"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

func TestFullNodeMetricsFollowTheCountersKeptAsStatesChange(t *testing.T) {
	f := benchFullNode(t, 1000) // a tenth failing, a tenth pending, the rest ok; none on disk
	reg := f.cfg.Metrics
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"gitfleet_repos", []string{"state", "ok"}, 800},
		{"gitfleet_repos", []string{"state", "failing"}, 100},
		{"gitfleet_repos", []string{"state", "pending"}, 100},
		{"gitfleet_repos_total", nil, 1000},
		{"gitfleet_repos_current", nil, 0}, // no mirror on disk
		{"gitfleet_tunnels", nil, 0},
		{"gitfleet_full_disk_full", nil, 0},
		{"gitfleet_pull_queue", []string{"state", "pending"}, 0},
	} {
		if got, ok := metricstest.Value(t, reg, c.family, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.family, c.labels, got, ok, c.want)
		}
	}

	// A failing repository comes back: the counters follow.
	f.states([]*fleetv1.RepoState{{Key: "host3.example/group3/repo3", State: "ok", Owner: f.n.ID(), Digest: "d3", LastCheckMs: 1e12 + 60e3}})
	if got, _ := metricstest.Value(t, reg, "gitfleet_repos", "state", "failing"); got != 99 {
		t.Errorf("after a failing repository came back: failing = %v, want 99", got)
	}
	if got, _ := metricstest.Value(t, reg, "gitfleet_repos", "state", "ok"); got != 801 {
		t.Errorf("after a failing repository came back: ok = %v, want 801", got)
	}

	f.mu.Lock()
	f.mismatches.add(7, 0)
	f.mismatches.add(7, 0)
	f.mu.Unlock()
	if got, _ := metricstest.Value(t, reg, "gitfleet_node_mismatches_total", "node", "7"); got != 2 {
		t.Errorf("forged tips of node 7 = %v, want 2", got)
	}
}
