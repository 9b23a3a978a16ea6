package gitcmd

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRunMemoryLimit is the cost of --git-memory-limit on the
// cheapest git process (git version): with the limit, git is held by
// ptrace at its start while the limit is set (see package spawn, whose
// BenchmarkStart compares the ways). Both alternate in one run.
func BenchmarkRunMemoryLimit(b *testing.B) {
	ctx := context.Background()
	plain, limited := New(Direct(), Options{}), New(Direct(), Options{MemoryLimit: 2 << 30})
	run := func(r *Runner) time.Duration {
		start := time.Now()
		if _, err := r.Output(ctx, Cmd{Name: "version"}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var p, l time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			p += run(plain)
			l += run(limited)
		} else {
			l += run(limited)
			p += run(plain)
		}
	}
	b.ReportMetric(float64(p.Microseconds())/float64(b.N), "µs/plain")
	b.ReportMetric(float64(l.Microseconds())/float64(b.N), "µs/limited")
	b.ReportMetric(float64(l)/float64(p), "limited/plain")
}
