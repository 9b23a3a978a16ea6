package placement

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

func benchKeys() int { return benchsize.Of(1_000_000, 10_000) }

// desired is where every key ends once its moves are done.
func desired(e *Engine) []uint32 {
	out := make([]uint32, len(e.keys))
	for i := range out {
		out[i] = e.want(int32(i))
	}
	return out
}

func loads(owners []uint32) map[uint32]int {
	c := map[uint32]int{}
	for _, o := range owners {
		c[o]++
	}
	return c
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkPlace1MKeys1000Members places 1,000,000 keys over 1,000 equal
// members from scratch: catalog loaded, then the members, every key queued
// for its first clone. It reports the heap the engine holds afterwards.
func BenchmarkPlace1MKeys1000Members(b *testing.B) {
	keys := testKeys(benchKeys())
	ms := equalMembers(span(1, 1000)...)
	base := heapInUse()
	var e *Engine
	for b.Loop() {
		e = nil
		e = New(Config{})
		e.AddKeys(keys...)
		e.SetMembers(ms)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/place")
	held := heapInUse() - base
	b.ReportMetric(float64(held)/(1<<20), "MB_heap")
	b.ReportMetric(float64(held)/float64(benchKeys()), "B/key")
	runtime.KeepAlive(e)
}

// BenchmarkLoadKeys adds 1,000,000 keys to an empty engine, as a
// coordinator's first catalog load does: in one call (the index is built
// in one ordered pass), and, for comparison, one key first and then the
// rest (each inserted where its hash says, at random in the table).
func BenchmarkLoadKeys(b *testing.B) {
	keys := testKeys(benchKeys())
	b.Run("bulk", func(b *testing.B) {
		for b.Loop() {
			New(Config{}).AddKeys(keys...)
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		for b.Loop() {
			e := New(Config{})
			e.AddKeys(keys[0])
			e.index.reserve(len(keys))
			e.AddKeys(keys[1:]...)
		}
	})
}

// settled returns an engine whose keys are all on their desired owners.
func settled(b *testing.B, keys []repokey.Key, ms []ring.Member) *Engine {
	e := New(Config{})
	e.AddKeys(keys...)
	e.SetMembers(ms)
	settle(b, e)
	return e
}

// BenchmarkChurn reports, for one member joining or leaving 100 equal
// members that hold 1,000,000 keys, the time SetMembers takes to recompute
// every key's owner, and the keys moved over the minimum that had to move
// (what the members that gain keys gain).
func BenchmarkChurn(b *testing.B) {
	keys := testKeys(benchKeys())
	hundred := equalMembers(span(1, 100)...)
	e := settled(b, keys, hundred)
	before := desired(e)
	for _, tt := range []struct {
		name  string
		after []ring.Member
	}{
		{"join", append(slices.Clone(hundred), ring.Member{ID: 101, Weight: 1})},
		{"leave", hundred[1:]},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var moved int
			var after []uint32
			for b.Loop() {
				e.SetMembers(tt.after)
				moved = e.PendingMoves()
				after = desired(e)
				b.StopTimer()
				e.SetMembers(hundred) // back: the moves are cancelled
				e.Decisions()
				b.StartTimer()
			}
			b.ReportMetric(float64(moved)/float64(minMoved(before, after)), "moved/min")
			b.ReportMetric(float64(moved), "moved")
		})
	}
}

// BenchmarkAddKeys100 is a catalog commit that adds 100 keys, then one that
// removes them, each with the decisions it leads to, on a settled engine of
// 10k, 100k and 1M keys over 20 and 100 equal members. placed_all/change is
// the share of commits that placed every key again: the load bound binds
// when members hold few keys (100 members at 10k keys: 100 keys each).
func BenchmarkAddKeys100(b *testing.B) {
	for _, members := range []uint32{20, 100} {
		for _, n := range benchsize.Of([]int{10_000, 100_000, 1_000_000}, []int{10_000}) {
			b.Run(fmt.Sprintf("members=%d/keys=%dk", members, n/1000), func(b *testing.B) {
				keys := testKeys(n + 100)
				e := settled(b, keys[:n], equalMembers(span(1, members)...))
				added := keys[n:]
				before := e.placements
				for b.Loop() {
					e.AddKeys(added...)
					if count(e.Decisions(), Assign) < len(added) {
						b.Fatal("adding keys: fewer assigns than keys")
					}
					e.RemoveKeys(added...)
					e.Decisions()
				}
				changes := float64(2 * b.N)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/changes, "ns/change")
				b.ReportMetric(float64(e.placements-before)/changes, "placed_all/change")
			})
		}
	}
}

// BenchmarkBalance reports max/mean load of 100 equal members, and the
// largest gap between a member's share and its capacity share with weights
// 1, 2, 4 and 8 mixed over 100 members, both at 1,000,000 keys.
func BenchmarkBalance(b *testing.B) {
	keys := testKeys(benchKeys())
	var mixed []ring.Member
	for i := range 100 {
		mixed = append(mixed, ring.Member{ID: uint32(i + 1), Weight: float64(int(1) << (i % 4))})
	}
	for _, tt := range []struct {
		name string
		ms   []ring.Member
	}{
		{"equal", equalMembers(span(1, 100)...)},
		{"mixed", mixed},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var e *Engine
			for b.Loop() {
				e = New(Config{})
				e.AddKeys(keys...)
				e.SetMembers(tt.ms)
			}
			load := loads(desired(e))
			total := 0.0
			for _, m := range tt.ms {
				total += m.Weight
			}
			maxRatio, maxErr := 0.0, 0.0
			for _, m := range tt.ms {
				fair := m.Weight / total * float64(len(keys))
				maxRatio = max(maxRatio, float64(load[m.ID])/fair)
				maxErr = max(maxErr, math.Abs(float64(load[m.ID])-fair)/fair)
			}
			b.ReportMetric(maxRatio, "max/mean")
			b.ReportMetric(maxErr, "max_share_err")
		})
	}
}

// BenchmarkOwner is the lookup of a key's owner.
func BenchmarkOwner(b *testing.B) {
	keys := testKeys(benchKeys())
	e := New(Config{})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(span(1, 100)...))
	i := 0
	for b.Loop() {
		if _, _, ok := e.Owner(keys[i%len(keys)]); !ok {
			b.Fatalf("key %d unknown", i)
		}
		i += 7919
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
}

// BenchmarkSnapshot encodes a settled engine of 1,000,000 keys over 100
// members with 100 keys handed back (overrides).
func BenchmarkSnapshot(b *testing.B) {
	keys := testKeys(benchKeys())
	e := settled(b, keys, equalMembers(span(1, 100)...))
	var handed []repokey.Key
	for _, k := range keys {
		if o, _, _ := e.Owner(k); o == 1 && len(handed) < 100 {
			handed = append(handed, k)
		}
	}
	e.HandBack(1, handed...)
	settle(b, e)
	var snap []byte
	for b.Loop() {
		snap = e.Snapshot()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/snapshot")
	b.ReportMetric(float64(len(snap)), "bytes")
}

// BenchmarkSnapshotFirstStart encodes an engine of 1,000,000 keys that all
// wait for their first clone (a first start), where every key is a record;
// whole keys is what version 1 of the format would have written for them.
func BenchmarkSnapshotFirstStart(b *testing.B) {
	keys := testKeys(benchKeys())
	e := New(Config{})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(span(1, 10)...))
	whole := 0
	for _, k := range keys {
		whole += len(k) + 1
	}
	var snap []byte
	for b.Loop() {
		snap = e.Snapshot()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/snapshot")
	b.ReportMetric(float64(len(snap))/float64(len(keys)), "bytes/key")
	b.ReportMetric(float64(whole)/float64(len(keys)), "whole-key-bytes/key")
}
