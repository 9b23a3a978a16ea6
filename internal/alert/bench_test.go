package alert

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkEvaluate times the rules and the evaluator alone over the
// snapshot of a fleet of 1,000,000 repositories and 100 nodes (a few gone
// or full): the figures are counters, so the size of the mirror does not
// enter. The full node's whole evaluation, its snapshot included, is
// BenchmarkAlertEvaluate in internal/fullnode.
//
//	go test ./internal/alert -run '^$' -bench Evaluate
func BenchmarkEvaluate(b *testing.B) {
	s := &Snapshot{Repos: &Repos{Total: 1_000_000, Failing: 60_000, Stale: 10_000, StaleAfter: 24 * time.Hour},
		NodesKnown: true, Catalog: &Catalog{}, Session: Session{Connected: true}, Mismatches: map[uint32]Mismatch{}}
	for i := range 100 {
		n := Node{ID: uint32(i + 1), Name: fmt.Sprintf("node-%d", i), State: "alive", DiskUsed: 50, DiskTotal: 100, Grace: 10 * time.Minute}
		if i%25 == 0 {
			n.State = "gone"
		}
		if i%30 == 0 {
			n.DiskUsed = 90
		}
		s.Nodes = append(s.Nodes, n)
	}
	e := NewEvaluator(Rules(DefaultThresholds()))
	now := t0
	for b.Loop() {
		now = now.Add(15 * time.Second)
		e.Evaluate(s, now)
	}
	b.ReportMetric(float64(len(e.Firing())), "firing")
}
