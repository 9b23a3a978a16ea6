package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/alert"
	"github.com/gitfleet/gitfleet/internal/clock"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// spreadLastChecks gives the view's repositories last checks spread over
// the two days before the clock's time, one a minute apart in turn, and
// returns how many are older than a day.
func spreadLastChecks(tb testing.TB, f *fullNode) int {
	tb.Helper()
	now := f.n.clk.Now()
	f.mu.Lock()
	var rs []*fleetv1.RepoState
	for _, st := range f.view {
		rs = append(rs, st)
	}
	f.mu.Unlock()
	old := 0
	for i := 0; i < len(rs); i += 10_000 {
		var batch []*fleetv1.RepoState
		for j, st := range rs[i:min(i+10_000, len(rs))] {
			age := time.Duration((i+j)%2880) * time.Minute
			if age > 24*time.Hour {
				old++
			}
			batch = append(batch, &fleetv1.RepoState{Key: st.GetKey(), Url: st.GetUrl(), Owner: st.GetOwner(), State: st.GetState(),
				Digest: st.GetDigest(), LastCheckMs: now.Add(-age).UnixMilli()})
		}
		f.states(batch)
	}
	return old
}

// TestTheFullNodesSnapshotCountsFailingAndStaleRepositories checks the
// figures the full node gives the rules, against its view.
func TestTheFullNodesSnapshotCountsFailingAndStaleRepositories(t *testing.T) {
	f := benchFullNode(t, 10_000) // a tenth failing
	f.alerts.cfg.StaleAfter = 24 * time.Hour
	old := spreadLastChecks(t, f)
	now := f.n.clk.Now()
	if s := f.alertSnapshot(context.Background(), now); s.Repos != nil {
		t.Fatalf("repositories' figures without a session: %+v", *s.Repos)
	}
	f.n.mu.Lock()
	f.n.sess = &coordSession{} // in session (with no coordinator to ask for nodes)
	f.n.mu.Unlock()
	s := f.alertSnapshot(context.Background(), now)
	if s.Repos == nil || s.Repos.Total != 10_000 || s.Repos.Failing != 1_000 || s.Repos.Stale != old {
		t.Fatalf("snapshot %+v, want 10000 repositories, 1000 failing, %d stale", s.Repos, old)
	}
	if s.NodesKnown || s.Catalog != nil {
		t.Fatal("nodes or catalog known without a coordinator")
	}
	// A day and a minute later every repository is stale; checked again, as
	// many as before.
	clk := f.n.clk.(*clock.Fake)
	clk.Advance(24*time.Hour + time.Minute)
	if s := f.alertSnapshot(context.Background(), clk.Now()); s.Repos.Stale != 10_000 {
		t.Fatalf("a day later: %d stale", s.Repos.Stale)
	}
	spreadLastChecks(t, f)
	if s := f.alertSnapshot(context.Background(), clk.Now()); s.Repos.Stale != old {
		t.Fatalf("checked again: %d stale, want %d", s.Repos.Stale, old)
	}
}

// BenchmarkAlertEvaluate times one evaluation of the alert rules by a full
// node holding 1,000,000 repositories (fake states, a tenth failing, last
// checks spread over two days), the clock 15 s further each time: the
// snapshot of its counters and the rules.
//
//	go test ./internal/node -run '^$' -bench AlertEvaluate -benchtime 1000x
func BenchmarkAlertEvaluate(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		f := benchFullNode(b, n)
		f.alerts.cfg.StaleAfter = 24 * time.Hour
		spreadLastChecks(b, f)
		f.n.mu.Lock()
		f.n.sess = &coordSession{}
		f.n.mu.Unlock()
		clk := f.n.clk.(*clock.Fake)
		ev := alert.NewEvaluator(alert.Rules(alert.DefaultThresholds()))
		b.Run(fmt.Sprintf("repos=%d", n), func(b *testing.B) {
			var s *alert.Snapshot
			for b.Loop() {
				clk.Advance(15 * time.Second)
				s = f.alertSnapshot(context.Background(), clk.Now())
				ev.Evaluate(s, clk.Now())
			}
			b.ReportMetric(float64(s.Repos.Stale), "stale")
		})
	}
}
