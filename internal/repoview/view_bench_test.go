package repoview

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// BenchmarkViewMillion reports what the full node's view holds a
// repository in at a million of them (keys, map entries, slots; the class
// beside it): the bytes live on the heap after the view is filled,
// divided by the repositories.
//
//	go test ./internal/repoview/ -run '^$' -bench '^BenchmarkViewMillion$' -benchtime 1x -benchmem
func BenchmarkViewMillion(b *testing.B) {
	const n = 1_000_000
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for b.Loop() {
		base := live()
		tab := newRepoTable()
		view, classes := newView(tab), newClassTable(tab)
		for i := range n {
			key := fmt.Sprintf("github.com/group-%04d/repo-%07d", i%1000, i)
			view.Put(&fleetv1.RepoState{Key: key, Url: "https://" + key, Owner: uint32(1 + i%5), State: "ok",
				Digest: fmt.Sprintf("%032x", i), LastCheckMs: 1e12 + int64(i), LastChangeMs: 1e12, Checks: 10, Fetches: 1})
			classes.put(key, Class{State: repostate.OK, Owner: uint32(1 + i%5), Current: true})
		}
		b.ReportMetric(float64(live()-base)/n, "bytes/repo")
		runtime.KeepAlive(view)
		runtime.KeepAlive(classes)
	}
}
