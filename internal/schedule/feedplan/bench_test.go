package feedplan

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
)

func benchKeys() int { return benchsize.Of(1_000_000, 10_000) }

func benchKeyList() []string {
	keys := make([]string, benchKeys())
	for i := range keys {
		keys[i] = fmt.Sprintf("github.com/owner%d/repo%d", i/10, i)
	}
	return keys
}

// benchPlanner plans keys, a tenth of them with a push a day for the last
// 30 days, at the budget of one GitHub token (500,000 repositories an
// hour for a million: each every 2 hours on average).
func benchPlanner(tb testing.TB, keys []string) *Planner {
	tb.Helper()
	p, err := New(Options{PerHour: float64(len(keys)) / 2, MaxInterval: 7 * 24 * time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	var busy []time.Time
	for d := 30; d > 0; d-- {
		busy = append(busy, t0.Add(-time.Duration(d)*24*time.Hour))
	}
	for i, k := range keys {
		var h []time.Time
		if i%10 == 0 {
			h = busy
		}
		p.Add(k, t0, h)
	}
	return p
}

// BenchmarkMemory1M reports the heap a Planner of a million keys takes,
// besides the keys' own bytes.
func BenchmarkMemory1M(b *testing.B) {
	keys := benchKeyList()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		p := benchPlanner(b, keys)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(benchKeys()), "bytes/key")
		runtime.KeepAlive(p)
	}
}

// BenchmarkNext1M times one batch of 100 asks at a million keys, each
// answered (Observe) with a push of one in ten, as a feed does.
func BenchmarkNext1M(b *testing.B) {
	keys := benchKeyList()
	p := benchPlanner(b, keys)
	now := t0
	i := 0
	for b.Loop() {
		now = now.Add(720 * time.Millisecond) // 5,000 requests an hour
		for _, k := range p.Next(now, 100) {
			var pushed time.Time
			if i++; i%10 == 0 {
				pushed = now.Add(-time.Minute)
			}
			p.Observe(k, now, pushed)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/key")
}

// BenchmarkObserve1M times one answer at a million keys, a new push each.
func BenchmarkObserve1M(b *testing.B) {
	keys := benchKeyList()
	p := benchPlanner(b, keys)
	now := t0
	i := 0
	for b.Loop() {
		now = now.Add(7 * time.Millisecond)
		p.Observe(keys[i%benchKeys()], now, now.Add(-time.Second))
		i += 7919 // a prime: keys in no particular order
	}
}
