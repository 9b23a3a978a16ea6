package repoview

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/repokey"
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
	viewMillion(b, func(int) string { return "" }, nil)
}

// BenchmarkViewMillionOnTheTier is BenchmarkViewMillion with every
// repository's replica set on a full tier of 20 nodes, 2 replicas each:
// what the tier adds to a full node's memory.
//
//	go test ./internal/repoview/ -run '^$' -bench '^BenchmarkViewMillionOnTheTier$' -benchtime 1x -benchmem
func BenchmarkViewMillionOnTheTier(b *testing.B) {
	viewMillion(b, func(int) string { return "" }, func(i int) []uint32 {
		a := uint32(1 + i%20)
		return []uint32{a, 1 + (a+uint32(i/20)%19)%20}
	})
}

// BenchmarkViewMillionTenthInNetworks is BenchmarkViewMillion with a tenth
// of the repositories in fork networks of 2 to 200 members (detected ones,
// named "root:" and a commit ID), as the placement's benchmark has them:
// what the networks' names and indexes add.
//
//	go test ./internal/repoview/ -run '^$' -bench '^BenchmarkViewMillionTenthInNetworks$' -benchtime 1x -benchmem
func BenchmarkViewMillionTenthInNetworks(b *testing.B) {
	// Networks of 2, 3, ... 200 members, one after another over the
	// networked keys (every tenth), then again.
	var size, left, id int
	viewMillion(b, func(i int) string {
		if i%10 != 0 {
			return ""
		}
		if left == 0 {
			size = size%200 + 1
			left, id = size+1, id+1
		}
		left--
		return fmt.Sprintf("root:%040x", id)
	}, nil)
}

// viewMillion fills a view and its classes with a million repositories,
// the i-th in network(i) ("": none) and with replicas(i) (nil: none), and
// reports the bytes a repository.
func viewMillion(b *testing.B, network func(i int) string, replicas func(i int) []uint32) {
	n := benchsize.Of(1_000_000, 10_000)
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
			var set []uint32
			if replicas != nil {
				set = replicas(i)
			}
			key := repokey.Key(fmt.Sprintf("github.com/group-%04d/repo-%07d", i%1000, i))
			put(view, &fleetv1.RepoState{Key: string(key), Url: "https://" + string(key), Owner: uint32(1 + i%5), State: "ok",
				Digest: fmt.Sprintf("%032x", i), LastCheckMs: 1e12 + int64(i), LastChangeMs: 1e12, Checks: 10, Fetches: 1,
				Network: network(i), Replicas: set})
			classes.put(key, Class{State: repostate.OK, Owner: uint32(1 + i%5), Current: true})
		}
		b.ReportMetric(float64(live()-base)/float64(n), "bytes/repo")
		runtime.KeepAlive(view)
		runtime.KeepAlive(classes)
	}
}
