package placement

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// equal returns n members of weight 1, IDs 1..n.
func equal(n int) []ring.Member {
	ms := make([]ring.Member, n)
	for i := range ms {
		ms[i] = ring.Member{ID: uint32(i + 1), Weight: 1}
	}
	return ms
}

// settledTier returns a tier of units u0..u(k-1) (weight 1) on members,
// every replica confirmed.
func settledTier(t *testing.T, k int, members []ring.Member) *Tier {
	t.Helper()
	tier := NewTier(TierConfig{})
	for i := range k {
		tier.SetUnit(fmt.Sprintf("u%d", i), 1)
	}
	tier.SetMembers(members)
	confirmAll(tier, tier.Decisions())
	if d := tier.Decisions(); len(d) != 0 {
		t.Fatalf("a settled tier decided %v", d)
	}
	return tier
}

// confirmAll confirms every assign of ds, and returns the drops that
// follow.
func confirmAll(tier *Tier, ds []TierDecision) []TierDecision {
	for _, d := range ds {
		if d.Kind == Assign {
			tier.Confirm(d.Node, d.Unit)
		}
	}
	return tier.Decisions()
}

func TestTierPutsEachUnitOnReplicasDistinctMembers(t *testing.T) {
	tier := settledTier(t, 1000, equal(5))
	for i := range 1000 {
		want, held, ok := tier.ReplicasOf(fmt.Sprintf("u%d", i))
		if !ok || len(want) != 2 || want[0] == want[1] {
			t.Fatalf("u%d: replicas %v, want 2 distinct members", i, want)
		}
		if !sameSet(want, held) {
			t.Fatalf("u%d: confirmed %v, want %v", i, held, want)
		}
	}
}

func TestTierWithFewerMembersThanReplicasEveryMemberHoldsEverything(t *testing.T) {
	tier := NewTier(TierConfig{Replicas: 3})
	tier.SetUnit("a", 1)
	tier.SetUnit("b", 1)
	tier.SetMembers(equal(2))
	tier.Decisions()
	for _, u := range []string{"a", "b"} {
		if want, _, _ := tier.ReplicasOf(u); !sameSet(want, []uint32{1, 2}) {
			t.Errorf("%s: replicas %v with 2 members and 3 replicas, want both members", u, want)
		}
	}
}

// A member that joins takes its share, and each replica it replaces is
// dropped only once it confirmed its copy.
func TestTierJoinIsMakeBeforeBreakPerReplica(t *testing.T) {
	tier := settledTier(t, 2000, equal(4))
	tier.SetMembers(equal(5))
	ds := tier.Decisions()
	var assigns []TierDecision
	for _, d := range ds {
		if d.Kind != Assign || d.Node != 5 {
			t.Fatalf("the join decided %v; want assigns to the new member only", d)
		}
		assigns = append(assigns, d)
	}
	// The ideal is R×K/N = 2×2000/5 = 800.
	if len(assigns) < 700 || len(assigns) > 900 {
		t.Fatalf("the join moved %d replicas, want about 800", len(assigns))
	}
	for _, d := range assigns {
		if _, held, _ := tier.ReplicasOf(d.Unit); len(held) != 2 {
			t.Fatalf("%s: %d confirmed replicas before the new one confirmed, want 2", d.Unit, len(held))
		}
		if d.From == 0 || d.Urgent {
			t.Fatalf("%v: want a copy from a replica, not urgent", d)
		}
	}
	a := assigns[0]
	tier.Confirm(a.Node, a.Unit)
	drops := tier.Decisions()
	if len(drops) != 1 || drops[0].Kind != Drop || drops[0].Unit != a.Unit || drops[0].Node == 5 {
		t.Fatalf("after %s confirmed on 5: %v, want one drop of it elsewhere", a.Unit, drops)
	}
	if want, held, _ := tier.ReplicasOf(a.Unit); !sameSet(want, held) || !slices.Contains(held, 5) {
		t.Fatalf("%s: confirmed %v, want %v", a.Unit, held, want)
	}
}

// A member gone past its grace loses its replicas: each goes to a
// survivor, urgent, copied from the replica that survives.
func TestTierLossPastGraceMovesReplicasToSurvivors(t *testing.T) {
	tier := settledTier(t, 1000, equal(4))
	tier.SetMembers(equal(4)[1:])
	ds := tier.Decisions()
	if len(ds) < 400 || len(ds) > 600 {
		t.Fatalf("the loss of 1 of 4 moved %d replicas, want about 500 (R×K/N)", len(ds))
	}
	for _, d := range ds {
		if d.Kind != Assign || d.Node == 1 || !d.Urgent || d.From == 0 || d.From == 1 {
			t.Fatalf("after the loss: %+v, want urgent assigns to survivors from a survivor", d)
		}
	}
	if drops := confirmAll(tier, ds); len(drops) != 0 {
		t.Fatalf("drops %v: the lost member is told nothing", drops)
	}
	for i := range 1000 {
		want, held, _ := tier.ReplicasOf(fmt.Sprintf("u%d", i))
		if len(held) != 2 || !sameSet(want, held) || slices.Contains(held, 1) {
			t.Fatalf("u%d: confirmed %v (want %v), want two survivors", i, held, want)
		}
	}
}

// A member back within its grace never left the members: nothing moves.
// One back past it, with its disk, confirms what it holds: it gets back
// its share, and the replicas that stood in for it are dropped.
func TestTierReturnKeepsWhatIsItsOwn(t *testing.T) {
	tier := settledTier(t, 500, equal(3))
	tier.SetMembers(equal(3)) // a session that dropped and came back in time
	if ds := tier.Decisions(); len(ds) != 0 {
		t.Fatalf("a return within the grace decided %v", ds)
	}
	var own []string
	for i := range 500 {
		if want, _, _ := tier.ReplicasOf(fmt.Sprintf("u%d", i)); slices.Contains(want, 3) {
			own = append(own, fmt.Sprintf("u%d", i))
		}
	}
	tier.SetMembers(equal(2)) // past the grace: with 2 members, both hold everything
	confirmAll(tier, tier.Decisions())
	tier.SetMembers(equal(3))
	ds := tier.Decisions()
	for _, d := range ds {
		if d.Kind != Assign || d.Node != 3 {
			t.Fatalf("the return decided %v before 3 confirmed anything", d)
		}
	}
	for _, k := range own { // its inventory
		tier.Confirm(3, k)
	}
	drops := tier.Decisions()
	if len(drops) != len(own) {
		t.Fatalf("%d drops once 3 confirmed its %d units, want one each", len(drops), len(own))
	}
	for i := range 500 {
		if want, held, _ := tier.ReplicasOf(fmt.Sprintf("u%d", i)); !sameSet(want, held) {
			t.Fatalf("u%d: confirmed %v, want %v", i, held, want)
		}
	}
}

// Members hold weight in proportion to their disks, and a heavy unit
// counts its weight against the bound.
func TestTierWeighsMembersByDisk(t *testing.T) {
	tier := NewTier(TierConfig{})
	for i := range 4000 {
		tier.SetUnit(fmt.Sprintf("u%d", i), 1+i%7)
	}
	tier.SetMembers([]ring.Member{{ID: 1, Weight: 1}, {ID: 2, Weight: 1}, {ID: 3, Weight: 2}, {ID: 4, Weight: 2}})
	tier.Decisions()
	held := tier.Held()
	var sum int
	for _, h := range held {
		sum += h[1]
	}
	for id, share := range map[uint32]float64{1: 1.0 / 6, 2: 1.0 / 6, 3: 2.0 / 6, 4: 2.0 / 6} {
		want := share * float64(sum)
		if got := float64(held[id][1]); got > 1.1*want+7 || got < 0.85*want {
			t.Errorf("member %d holds weight %.0f, want its share %.0f within 10%%", id, got, want)
		}
	}
}

// A restored tier with the same members moves nothing, and a move under
// way is sent again.
func TestTierSnapshotRoundTrip(t *testing.T) {
	tier := settledTier(t, 300, equal(3))
	tier.SetMembers(equal(4))
	ds := tier.Decisions()
	tier.Confirm(ds[0].Node, ds[0].Unit) // one move done, the others under way
	tier.Decisions()
	units := map[string]int{}
	for _, u := range tier.Units() {
		units[u] = 1
	}
	back, err := RestoreTier(TierConfig{}, tier.Snapshot(), units)
	if err != nil {
		t.Fatal(err)
	}
	again := back.Decisions()
	if len(again) != len(ds)-1 {
		t.Fatalf("the restored tier decided %d, want the %d moves under way again", len(again), len(ds)-1)
	}
	for _, d := range again {
		if d.Kind != Assign || d.Node != 4 || d.Unit == ds[0].Unit {
			t.Fatalf("the restored tier decided %v", d)
		}
	}
	for _, u := range tier.Units() {
		w1, h1, _ := tier.ReplicasOf(u)
		w2, h2, _ := back.ReplicasOf(u)
		if !slices.Equal(w1, w2) || !sameSet(h1, h2) {
			t.Fatalf("%s: restored %v/%v, want %v/%v", u, w2, h2, w1, h1)
		}
	}
	if _, err := RestoreTier(TierConfig{}, tier.Snapshot()[:12], units); err == nil {
		t.Fatal("a truncated snapshot restored")
	}
}

// BenchmarkTierMillion reports the coordinator's memory for the full tier
// at a million units on 20 full nodes, 2 replicas each, every replica
// confirmed, and the time to place them all.
//
//	go test ./internal/placement/ -run '^$' -bench '^BenchmarkTierMillion$' -benchtime 1x
func BenchmarkTierMillion(b *testing.B) {
	n := benchsize.Of(1_000_000, 10_000)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("github.com/group-%04d/repo-%07d", i%1000, i)
	}
	for b.Loop() {
		base := liveHeap()
		tier := NewTier(TierConfig{})
		for _, k := range names {
			tier.SetUnit(k, 1)
		}
		tier.SetMembers(equal(20))
		start := time.Now()
		ds := tier.Decisions()
		b.ReportMetric(time.Since(start).Seconds(), "s/place")
		for _, d := range ds {
			tier.Confirm(d.Node, d.Unit)
		}
		ds = nil
		tier.Decisions()
		b.ReportMetric(float64(liveHeap()-base)/float64(n), "bytes/unit")
		runtime.KeepAlive(tier)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Loads counts what each member is to hold and holds, and the units short
// of replicas: none on a settled tier, those of a member that left until
// others confirm them.
func TestTierLoadsCountHoldingsAndUnitsShortOfReplicas(t *testing.T) {
	tier := settledTier(t, 300, equal(4))
	loads, under, _ := tier.Loads()
	total := 0
	for id, l := range loads {
		if l.HeldUnits != l.Units || l.HeldWeight != l.Weight {
			t.Errorf("settled: member %d holds %+v", id, l)
		}
		total += l.HeldUnits
	}
	if under != 0 || total != 2*300 {
		t.Fatalf("settled: %d units short, %d replicas held; want 0 and 600", under, total)
	}
	tier.SetMembers(equal(3)) // member 4 leaves with its share
	ds := tier.Decisions()
	loads, under, weight := tier.Loads()
	if _, ok := loads[4]; ok {
		t.Errorf("a member that left is counted: %+v", loads[4])
	}
	if under == 0 || weight != under {
		t.Fatalf("after a member left: %d units short (weight %d), want its units", under, weight)
	}
	confirmAll(tier, ds)
	if _, under, _ = tier.Loads(); under != 0 {
		t.Errorf("after the others confirmed its units: %d short, want 0", under)
	}
}
