package ring

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
)

func benchKeys() int { return benchsize.Of(1_000_000, 10_000) }

func benchKeySet() []string {
	keys := make([]string, benchKeys())
	for i := range keys {
		keys[i] = fmt.Sprintf("github.com/org%d/repo-%d", i%20_000, i)
	}
	return keys
}

func hashAll(keys []string) []uint64 {
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = Hash(k)
	}
	return hs
}

// lookupHashes is the plain consistent-hash owner of each hash.
func lookupHashes(r *Ring, hs []uint64) []uint32 {
	out := make([]uint32, len(hs))
	for i, h := range hs {
		out[i] = r.members[r.owners[r.successor(h)]].ID
	}
	return out
}

func counts(owners []uint32) map[uint32]int {
	c := map[uint32]int{}
	for _, id := range owners {
		c[id]++
	}
	return c
}

func BenchmarkLookup100Members(b *testing.B) {
	r := New(equalMembers(100), Options{})
	keys := testKeys(1 << 16)
	i := 0
	for b.Loop() {
		if _, ok := r.Lookup(keys[i&(len(keys)-1)]); !ok {
			b.Fatal("no owner")
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
}

// BenchmarkPlace1MKeys1000Members builds a ring of 1,000 members and places
// 1,000,000 keys on it from scratch, hashing included.
func BenchmarkPlace1MKeys1000Members(b *testing.B) {
	ms := equalMembers(1000)
	keys := benchKeySet()
	for b.Loop() {
		New(ms, Options{}).Place(keys)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/place")
}

// BenchmarkBalance100Members reports max/mean load of 100 equal members
// with 1M keys, for plain hashing and for bounded-load placement.
func BenchmarkBalance100Members(b *testing.B) {
	r := New(equalMembers(100), Options{})
	hs := hashAll(benchKeySet())
	var placed []uint32
	for b.Loop() {
		placed = r.PlaceHashes(hs)
	}
	mean := float64(len(hs)) / 100
	maxOf := func(c map[uint32]int) float64 {
		m := 0
		for _, n := range c {
			m = max(m, n)
		}
		return float64(m)
	}
	b.ReportMetric(maxOf(counts(lookupHashes(r, hs)))/mean, "lookup_max/mean")
	b.ReportMetric(maxOf(counts(placed))/mean, "place_max/mean")
}

// BenchmarkChurn reports keys moved over keys that had to move when one
// member joins or leaves 100 equal members holding 1M keys. With the
// default load factor the bound almost never binds; 1.05 shows the cost of
// a bound that does.
func BenchmarkChurn(b *testing.B) {
	hs := hashAll(benchKeySet())
	hundred := equalMembers(100)
	for _, tt := range []struct {
		name          string
		before, after []Member
		changed       uint32 // the member that joins or leaves
	}{
		{"join", hundred, append(slices.Clone(hundred), Member{ID: 101, Weight: 1}), 101},
		{"leave", hundred, hundred[1:], 1},
	} {
		for _, factor := range []float64{DefaultLoadFactor, 1.05} {
			b.Run(fmt.Sprintf("%s/c=%g", tt.name, factor), func(b *testing.B) {
				opts := Options{LoadFactor: factor}
				before := New(tt.before, opts)
				oldLookup, oldPlace := lookupHashes(before, hs), before.PlaceHashes(hs)
				var after *Ring
				var newPlace []uint32
				for b.Loop() {
					after = New(tt.after, opts)
					newPlace = after.PlaceHashes(hs)
				}
				newLookup := lookupHashes(after, hs)
				ratio := func(old, cur []uint32) float64 {
					moved, must := 0, 0
					for i := range old {
						if old[i] != cur[i] {
							moved++
						}
						if old[i] == tt.changed || cur[i] == tt.changed {
							must++
						}
					}
					return float64(moved) / float64(must)
				}
				b.ReportMetric(ratio(oldLookup, newLookup), "lookup_moved/min")
				b.ReportMetric(ratio(oldPlace, newPlace), "place_moved/min")
			})
		}
	}
}

// BenchmarkMixedWeights reports the largest relative gap between a member's
// share of 1M keys and its capacity share, with weights 1, 2, 4 and 8 mixed
// over 100 members.
func BenchmarkMixedWeights(b *testing.B) {
	var ms []Member
	var total float64
	for i := range 100 {
		ms = append(ms, Member{ID: uint32(i + 1), Weight: float64(int(1) << (i % 4))})
		total += ms[i].Weight
	}
	hs := hashAll(benchKeySet())
	var r *Ring
	var placed []uint32
	for b.Loop() {
		r = New(ms, Options{})
		placed = r.PlaceHashes(hs)
	}
	worst := func(c map[uint32]int) float64 {
		w := 0.0
		for _, m := range ms {
			want := m.Weight / total * float64(len(hs))
			w = max(w, math.Abs(float64(c[m.ID])-want)/want)
		}
		return w
	}
	b.ReportMetric(worst(counts(lookupHashes(r, hs))), "lookup_max_share_err")
	b.ReportMetric(worst(counts(placed)), "place_max_share_err")
}
