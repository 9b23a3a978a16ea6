package placement

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// millionTier returns a tier of n units (weight 1) on 20 equal members,
// every replica confirmed, and the units' names.
func millionTier(b *testing.B, n int) (*Tier, []string) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("github.com/group-%04d/repo-%07d", i%1000, i)
	}
	tier := NewTier(TierConfig{})
	for _, k := range names {
		tier.SetUnit(k, 1)
	}
	tier.SetMembers(equal(20))
	for _, d := range tier.Decisions() {
		tier.Confirm(d.Node, d.Unit)
	}
	tier.Decisions()
	if !tier.plain {
		b.Fatal("the bound displaced units of a settled tier at a million on 20 members")
	}
	return tier, names
}

// BenchmarkTierDiff100 is a catalog commit that adds 100 units, then one
// that removes them, each with its decisions, on a settled tier of a
// million units over 20 full nodes (compare BenchmarkAddKeys100, the
// owners' engine). placed_all/change is the share of commits that placed
// every unit again.
//
//	go test ./internal/placement/ -run '^$' -bench '^BenchmarkTierDiff100$' -benchtime 300x
func BenchmarkTierDiff100(b *testing.B) {
	tier, _ := millionTier(b, benchsize.Of(1_000_000, 10_000))
	placings, changes := tier.placings, 0
	round := 0
	for b.Loop() {
		added := make([]string, 100)
		for i := range added {
			added[i] = fmt.Sprintf("example.org/new-%d/%d", round, i)
			tier.SetUnit(added[i], 1)
		}
		for _, d := range tier.Decisions() {
			tier.Confirm(d.Node, d.Unit)
		}
		tier.Decisions()
		for _, k := range added {
			tier.SetUnit(k, 0)
		}
		tier.Decisions()
		changes += 2
		round++
	}
	b.ReportMetric(float64(tier.placings-placings)/float64(changes), "placed_all/change")
}

// BenchmarkTierJoin is a 21st full node joining 20 that hold a million
// units: SetMembers and the decisions (every unit placed again), against
// the owners' engine placing a million keys again for the same join.
//
//	go test ./internal/placement/ -run '^$' -bench '^BenchmarkTierJoin$' -benchtime 3x
func BenchmarkTierJoin(b *testing.B) {
	n := benchsize.Of(1_000_000, 10_000)
	twenty := equal(20)
	joined := append(slices.Clone(twenty), ring.Member{ID: 21, Weight: 1})
	b.Run("tier", func(b *testing.B) {
		tier, _ := millionTier(b, n)
		for b.Loop() {
			tier.SetMembers(joined)
			ds := tier.Decisions()
			b.StopTimer()
			b.ReportMetric(float64(len(ds)), "decisions")
			tier.SetMembers(twenty) // back: the moves are cancelled
			tier.Decisions()
			b.StartTimer()
		}
	})
	b.Run("engine", func(b *testing.B) {
		e := settled(b, testKeys(n), twenty)
		for b.Loop() {
			e.SetMembers(joined)
			ds := e.Decisions()
			b.StopTimer()
			b.ReportMetric(float64(len(ds)), "decisions")
			e.SetMembers(twenty)
			e.Decisions()
			b.StartTimer()
		}
	})
}

// BenchmarkTierLoads is what the API's tier figures cost (each full
// node's share and the units short of replicas: Tier.Loads, a walk for
// the shares and one for the units short, as GET /api/v1/nodes and
// /api/v1/catalog ask them) of a settled tier of a million units over 20
// full nodes.
//
//	go test ./internal/placement/ -run '^$' -bench '^BenchmarkTierLoads$' -benchtime 20x
func BenchmarkTierLoads(b *testing.B) {
	tier, _ := millionTier(b, benchsize.Of(1_000_000, 10_000))
	b.ResetTimer()
	for b.Loop() {
		if _, under, _ := tier.Loads(); under != 0 {
			b.Fatalf("%d units short on a settled tier", under)
		}
	}
}
