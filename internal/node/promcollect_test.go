package node

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/metrics/metricstest"
	"github.com/gitfleet/gitfleet/internal/schedule"
)

func TestNodeMetricsOfTheSchedulerAndOfChecks(t *testing.T) {
	n, err := New(Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), Fetchers: 1},
		slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1e9, 0)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.TestHooks().Close)
	reg := n.cfg.Metrics
	n.sched.Add("github.com/a/b", "github.com", schedule.RepoState{}) // not cloned: the urgent lane
	n.sched.Add("github.com/a/c", "github.com", schedule.RepoState{Cloned: true, LastCheck: n.clk.Now()})
	if got, _ := metricstest.Value(t, reg, "gitfleet_scheduler_repos"); got != 2 {
		t.Errorf("scheduler repos = %v, want 2", got)
	}
	if got, _ := metricstest.Value(t, reg, "gitfleet_scheduler_queue", "lane", "urgent"); got != 1 {
		t.Errorf("urgent lane = %v, want 1", got)
	}
	if got, _ := metricstest.Value(t, reg, "gitfleet_scheduler_overdue", "by", "due"); got != 0 {
		t.Errorf("overdue = %v, want 0: the checked repository is not due yet", got)
	}
	// Not checked for a month: due, and past --max-interval.
	n.sched.Add("github.com/a/d", "github.com", schedule.RepoState{Cloned: true, LastCheck: n.clk.Now().Add(-30 * 24 * time.Hour)})
	for _, by := range []string{"due", "past_max_interval"} {
		if got, _ := metricstest.Value(t, reg, "gitfleet_scheduler_overdue", "by", by); got != 1 {
			t.Errorf("overdue by %s = %v, want 1", by, got)
		}
	}
	if got, ok := metricstest.Value(t, reg, "gitfleet_node_session"); !ok || got != 0 {
		t.Errorf("session = %v (present %v), want 0: never connected", got, ok)
	}

	n.met.checked("full", "clone", "https://GitHub.com/a/b.git", "not-found", 0, errors.New("not found"))
	n.met.checked("full", "fetch", "https://github.com/a/c.git", "", 0, nil)
	// Staleness at a check: an hour since the last success; a first check
	// has none.
	n.met.rechecked(n.clk.Now().Add(-time.Hour), n.clk.Now())
	n.met.rechecked(time.Time{}, n.clk.Now())
	fams, _ := reg.Gather()
	for _, fam := range fams {
		if fam.GetName() == "gitfleet_check_interval_seconds" {
			h := fam.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != 3600 {
				t.Errorf("staleness at a check: %d samples summing to %v s, want 1 of 3600 s", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"gitfleet_check_duration_seconds", []string{"kind", "clone", "result", "failed"}, 1},
		{"gitfleet_check_duration_seconds", []string{"kind", "fetch", "result", "ok"}, 1},
		{"gitfleet_upstream_errors_total", []string{"class", "not-found", "host", "github.com"}, 1},
		{"gitfleet_fetched_bytes_total", []string{"source", "upstream"}, 0},
	} {
		if got, ok := metricstest.Value(t, reg, c.family, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.family, c.labels, got, ok, c.want)
		}
	}
}
