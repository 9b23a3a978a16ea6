package fullnode

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/alert"
	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/node"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// spreadLastChecks gives the view's repositories last checks, and
// verified_at, spread over the two days before the clock's time, one a
// minute apart in turn, and returns how many are older than a day.
func spreadLastChecks(tb testing.TB, f *Node) int {
	tb.Helper()
	now := f.clk.Now()
	f.mu.Lock()
	var rs []*fleetv1.RepoState
	for k := range f.view.Keys() {
		rs = append(rs, f.view.Get(k))
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
		for _, r := range batch {
			forceVerified(f, r.GetKey(), r.GetLastCheckMs())
		}
		f.reclass(stateKeys(batch)...)
	}
	return old
}

// TestTheFullNodesSnapshotCountsFailingAndStaleRepositories checks the
// figures the full node gives the rules, against its view.
func TestTheFullNodesSnapshotCountsFailingAndStaleRepositories(t *testing.T) {
	f := benchFullNode(t, 10_000) // a tenth failing
	f.alerts.cfg.StaleAfter = 24 * time.Hour
	old := spreadLastChecks(t, f)
	now := f.clk.Now()
	if s := f.alertSnapshot(context.Background(), now); s.Repos != nil {
		t.Fatalf("repositories' figures without a session: %+v", *s.Repos)
	}
	f.n.TestHooks().InSession() // with no coordinator to ask for nodes
	s := f.alertSnapshot(context.Background(), now)
	if s.Repos == nil || s.Repos.Total != 10_000 || s.Repos.Failing != 1_000 || s.Repos.Stale != old {
		t.Fatalf("snapshot %+v, want 10000 repositories, 1000 failing, %d stale", s.Repos, old)
	}
	if s.NodesKnown || s.Catalog != nil {
		t.Fatal("nodes or catalog known without a coordinator")
	}
	// A day and a minute later every repository is stale; checked again, as
	// many as before.
	clk := f.clk.(*clock.Fake)
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
//	go test ./internal/fullnode -run '^$' -bench AlertEvaluate -benchtime 1000x
func BenchmarkAlertEvaluate(b *testing.B) {
	for _, n := range benchsize.Of([]int{10_000, 1_000_000}, []int{1000}) {
		f := benchFullNode(b, n)
		f.alerts.cfg.StaleAfter = 24 * time.Hour
		spreadLastChecks(b, f)
		f.n.TestHooks().InSession()
		clk := f.clk.(*clock.Fake)
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

// TestFiringAlertsAreKeptAcrossARestartAndResolveOnce restarts a full
// node (the same data directory) while two alerts fire: neither fires
// again, and each resolves once when its condition ends.
func TestFiringAlertsAreKeptAcrossARestartAndResolveOnce(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1e9, 0))
	th := alert.DefaultThresholds()
	th.Hold = 0
	open := func() *Node {
		f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: dir, Fetchers: 1},
			Alerts: AlertConfig{Thresholds: th}}, slog.New(slog.NewTextHandler(io.Discard, nil)), clk)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.n.TestHooks().Close)
		f.n.TestHooks().InSession()
		return f
	}
	view := func(f *Node, failing int) {
		var rs []*fleetv1.RepoState
		for i := range 20 {
			st := "ok"
			if i < failing {
				st = "failing"
			}
			rs = append(rs, &fleetv1.RepoState{Key: fmt.Sprintf("example.org/r%d", i), State: st, LastCheckMs: clk.Now().UnixMilli()})
		}
		f.states(rs)
	}
	keys := func(evs []alert.Event) string {
		var out []string
		for _, e := range evs {
			out = append(out, string(e.Status)+" "+e.Key)
		}
		return strings.Join(out, ", ")
	}
	ctx := context.Background()

	a := open()
	view(a, 5) // 25% failing
	a.mu.Lock()
	a.mismatches.add(9, 0)
	a.mu.Unlock()
	if got := keys(a.evaluateAlerts(ctx)); got != "firing mismatch/9, firing repos-failing" {
		t.Fatalf("first start: %s", got)
	}
	a.n.TestHooks().Close()

	b := open()
	b.restoreAlerts(ctx)
	view(b, 5)
	clk.Advance(15 * time.Second)
	if got := keys(b.evaluateAlerts(ctx)); got != "" {
		t.Fatalf("after the restart: %s", got)
	}
	view(b, 0)
	clk.Advance(15 * time.Second)
	if got := keys(b.evaluateAlerts(ctx)); got != "resolved repos-failing" {
		t.Fatalf("failing repositories back: %s", got)
	}
	clk.Advance(time.Hour) // an hour without a forged tip since the restart
	if got := keys(b.evaluateAlerts(ctx)); got != "resolved mismatch/9" {
		t.Fatalf("an hour later: %s", got)
	}
	clk.Advance(15 * time.Second)
	if got := keys(b.evaluateAlerts(ctx)); got != "" {
		t.Fatalf("then: %s", got)
	}
	n := 0
	if err := b.db.Scan(ctx, bucketAlerts, "", func(string, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("%d alerts kept after they resolved (%v)", n, err)
	}
}

func TestAFullNodeWithABadAlertURLDoesNotStart(t *testing.T) {
	_, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir()},
		Alerts: AlertConfig{URLs: []string{"teams+https://example.org/hook"}}}, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Real{})
	if err == nil || !strings.Contains(err.Error(), "--alert") || !strings.Contains(err.Error(), `unknown kind "teams"`) {
		t.Fatalf("err = %v", err)
	}
}
