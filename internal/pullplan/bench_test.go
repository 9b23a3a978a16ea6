package pullplan

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// benchKeys is how many keys wait for a pull in BenchmarkPick: a fleet of
// a million repositories after a catalog arrives, or with its owners down.
func benchKeys() int { return benchsize.Of(1_000_000, 10_000) }

func benchKeyNames(n int) []repokey.Key {
	keys := make([]repokey.Key, n)
	for i := range keys {
		keys[i] = repokey.Key(fmt.Sprintf("github.com/owner%d/repo%d", i%5000, i))
	}
	return keys
}

// heapBytes is the live heap after a collection.
func heapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkPick measures a pick (Next, the pull's end, the key queued
// again) among a million pending keys: all due ("due"), or all waiting out
// their backoff but one ("retrying", owners down); and the same with the
// scan of maps the full node used before ("scan/..."), which ranged over
// the pending keys until one was neither pulling nor waiting. bytes/key is
// the plan's memory per pending key, the key's text (the view's) aside.
func BenchmarkPick(b *testing.B) {
	keys := benchKeyNames(benchKeys())
	for _, retrying := range []bool{false, true} {
		name := map[bool]string{false: "due", true: "retrying"}[retrying]
		b.Run("heap/"+name, func(b *testing.B) {
			before := heapBytes()
			p := New(Config{Jitter: fullWait{}})
			for _, k := range keys {
				p.Queue(k)
			}
			if retrying {
				for range keys[1:] {
					k, _ := p.Next(t0)
					p.Ended(k, "d", Failed, t0)
				}
			}
			perKey := float64(heapBytes()-before) / float64(benchKeys())
			b.ResetTimer()
			for b.Loop() {
				k, ok := p.Next(t0)
				if !ok {
					b.Fatal("nothing to pick")
				}
				p.Ended(k, "d", Pulled, t0)
				p.Queue(k)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pick")
			b.ReportMetric(perKey, "bytes/key")
			runtime.KeepAlive(p)
		})
		b.Run("scan/"+name, func(b *testing.B) {
			before := heapBytes()
			s := &scan{pending: map[repokey.Key]bool{}, pulling: map[repokey.Key]bool{}, retryAt: map[repokey.Key]time.Time{}}
			for _, k := range keys {
				s.pending[k] = true
			}
			if retrying {
				for _, k := range keys[1:] {
					s.retryAt[k] = t0.Add(30 * time.Second)
				}
			}
			perKey := float64(heapBytes()-before) / float64(benchKeys())
			b.ResetTimer()
			for b.Loop() {
				k, ok := s.next(t0)
				if !ok {
					b.Fatal("nothing to pick")
				}
				delete(s.pulling, k)
				s.pending[k] = true
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pick")
			b.ReportMetric(perKey, "bytes/key")
			runtime.KeepAlive(s)
		})
	}
}

// scan is the full node's pick before this package: maps, and a range over
// the pending keys (the retries' failure counts aside).
type scan struct {
	pending, pulling map[repokey.Key]bool
	retryAt          map[repokey.Key]time.Time
}

func (s *scan) next(now time.Time) (repokey.Key, bool) {
	for k := range s.pending {
		if s.pulling[k] || now.Before(s.retryAt[k]) {
			continue
		}
		delete(s.pending, k)
		s.pulling[k] = true
		return k, true
	}
	return "", false
}
