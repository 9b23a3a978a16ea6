package api

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkPacerReserve measures the webhook pacing of one delivery: a
// reservation in the bucket of one of 10,000 repositories, at a
// millisecond past the last one (the buckets refill, empty, and are
// pruned as a day of pushes would have them).
func BenchmarkPacerReserve(b *testing.B) {
	p := newPacer(5*time.Second, hookBurst)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "github.com/org/repo" + strconv.Itoa(i)
	}
	now := epoch
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		p.reserve(keys[i%len(keys)], now)
		i++
	}
}
