package ring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func equalMembers(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{ID: uint32(i + 1), Weight: 1}
	}
	return ms
}

func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("github.com/org%d/repo%d", i%997, i)
	}
	return keys
}

func lookupAll(t *testing.T, r *Ring, keys []string) []uint32 {
	t.Helper()
	out := make([]uint32, len(keys))
	for i, k := range keys {
		id, ok := r.Lookup(k)
		if !ok {
			t.Fatalf("Lookup(%q) found no owner on a ring with %d members", k, len(r.Members()))
		}
		out[i] = id
	}
	return out
}

func TestHashesArePinnedSoPlacementSurvivesUpgrades(t *testing.T) {
	tests := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"empty key", Hash(""), 0xef46db3751d8e999},
		{"repository key", Hash("github.com/a/b"), 0x7a13709c5f88afae},
		{"vnode 3 of member 7", vnodeHash(7, 3), 0x424edc376e0fc396},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: hash %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
}

func TestPlacementDoesNotDependOnMemberOrder(t *testing.T) {
	ms := []Member{{5, 1}, {1, 2}, {9, 0.5}, {3, 1}, {7, 4}}
	reversed := slices.Clone(ms)
	slices.Reverse(reversed)
	keys := testKeys(5000)

	a := New(ms, Options{VnodesPerWeight: 50, LoadFactor: 1.05})
	b := New(reversed, Options{VnodesPerWeight: 50, LoadFactor: 1.05})
	if !slices.Equal(a.Members(), b.Members()) {
		t.Fatalf("members %v and %v differ", a.Members(), b.Members())
	}
	if !slices.Equal(lookupAll(t, a, keys), lookupAll(t, b, keys)) {
		t.Error("Lookup differs between rings built from the same members in another order")
	}
	if !slices.Equal(a.Place(keys), b.Place(keys)) {
		t.Error("Place differs between rings built from the same members in another order")
	}
	for _, k := range keys[:100] {
		if !slices.Equal(a.LookupN(k, 3), b.LookupN(k, 3)) {
			t.Fatalf("LookupN(%q) differs between rings built in another order", k)
		}
	}
}

func TestPlaceDoesNotDependOnKeyOrder(t *testing.T) {
	r := New(equalMembers(7), Options{VnodesPerWeight: 5, LoadFactor: 1})
	keys := testKeys(3000)
	shuffled := slices.Clone(keys)
	// A fixed permutation: reverse, then rotate.
	slices.Reverse(shuffled)
	shuffled = append(shuffled[1234:], shuffled[:1234]...)

	want := map[string]uint32{}
	for i, id := range r.Place(keys) {
		want[keys[i]] = id
	}
	for i, id := range r.Place(shuffled) {
		if want[shuffled[i]] != id {
			t.Fatalf("key %q placed on %d, and on %d when keys came in another order", shuffled[i], want[shuffled[i]], id)
		}
	}
	hashes := make([]uint64, len(shuffled))
	for i, k := range shuffled {
		hashes[i] = Hash(k)
	}
	for i, id := range r.PlaceHashes(hashes) {
		if want[shuffled[i]] != id {
			t.Fatalf("PlaceHashes put key %q on %d, Place on %d", shuffled[i], id, want[shuffled[i]])
		}
	}
}

func TestEmptyRingOwnsNothing(t *testing.T) {
	for name, ms := range map[string][]Member{
		"no members":              nil,
		"only weightless members": {{ID: 1, Weight: 0}, {ID: 2, Weight: -1}, {ID: 3, Weight: math.NaN()}, {ID: 4, Weight: math.Inf(-1)}},
	} {
		r := New(ms, Options{})
		if got := r.Members(); len(got) != 0 {
			t.Errorf("%s: Members() = %v, want none", name, got)
		}
		if id, ok := r.Lookup("github.com/a/b"); ok {
			t.Errorf("%s: Lookup found owner %d", name, id)
		}
		if got := r.LookupN("github.com/a/b", 3); got != nil {
			t.Errorf("%s: LookupN = %v, want nil", name, got)
		}
		if got := r.Place([]string{"github.com/a/b"}); got != nil {
			t.Errorf("%s: Place = %v, want nil", name, got)
		}
	}
}

func TestSingleMemberOwnsEveryKey(t *testing.T) {
	for name, opts := range map[string]Options{"defaults": {}, "one point": {VnodesPerWeight: 1}} {
		r := New([]Member{{ID: 42, Weight: 0.1}}, opts)
		keys := testKeys(1000)
		for i, id := range lookupAll(t, r, keys) {
			if id != 42 {
				t.Fatalf("%s: Lookup(%q) = %d, want 42", name, keys[i], id)
			}
		}
		for i, id := range r.Place(keys) {
			if id != 42 {
				t.Fatalf("%s: Place put %q on %d, want 42", name, keys[i], id)
			}
		}
		if got := r.LookupN(keys[0], 5); !slices.Equal(got, []uint32{42}) {
			t.Errorf("%s: LookupN(_, 5) = %v, want [42]", name, got)
		}
	}
}

func TestSuccessorIsFirstPointAtOrAfterHash(t *testing.T) {
	for _, vnodes := range []int{1, 2, 3, 7, 100} {
		r := New(equalMembers(3), Options{VnodesPerWeight: vnodes})
		probes := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1, 1 << 63}
		for _, p := range r.points {
			probes = append(probes, p-1, p, p+1)
		}
		for _, h := range testKeys(200) {
			probes = append(probes, Hash(h))
		}
		for _, h := range probes {
			want, _ := slices.BinarySearch(r.points, h)
			if want == len(r.points) {
				want = 0
			}
			if got := r.successor(h); got != want {
				t.Fatalf("%d points: successor(%#x) = %d, want %d", len(r.points), h, got, want)
			}
		}
	}
}

func TestWeightAboveMaxCountsAsMax(t *testing.T) {
	r := New([]Member{{ID: 1, Weight: math.Inf(1)}, {ID: 2, Weight: 1e300}, {ID: 3, Weight: 1}}, Options{VnodesPerWeight: 2})
	if got, want := r.Members(), []Member{{1, MaxWeight}, {2, MaxWeight}, {3, 1}}; !slices.Equal(got, want) {
		t.Fatalf("Members() = %v, want %v", got, want)
	}
	if got, want := len(r.points), 2*MaxWeight*2+2; got != want {
		t.Errorf("%d points, want %d", got, want)
	}
	count := map[uint32]int{}
	for _, id := range r.Place(testKeys(2010)) {
		count[id]++
	}
	if count[3] > 13 { // ceil(1.25 * 1/201 * 2010)
		t.Errorf("member 3 of weight 1 holds %d of 2010 keys beside two members of weight %d", count[3], MaxWeight)
	}
}

func TestDuplicateMemberIDPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New accepted two members with ID 3")
		}
	}()
	New([]Member{{3, 1}, {4, 1}, {3, 2}}, Options{})
}

func TestSharesFollowWeights(t *testing.T) {
	var ms []Member
	for i := range 30 {
		ms = append(ms, Member{ID: uint32(i + 1), Weight: []float64{0.5, 1, 2, 4}[i%4]})
	}
	var total float64
	for _, m := range ms {
		total += m.Weight
	}
	keys := testKeys(200_000)
	r := New(ms, Options{})
	for name, owners := range map[string][]uint32{"Lookup": lookupAll(t, r, keys), "Place": r.Place(keys)} {
		count := map[uint32]int{}
		for _, id := range owners {
			count[id]++
		}
		for _, m := range ms {
			want := m.Weight / total * float64(len(keys))
			if dev := math.Abs(float64(count[m.ID])-want) / want; dev > 0.15 {
				t.Errorf("%s: member %d (weight %g) has %d keys, want %.0f ± 15%%", name, m.ID, m.Weight, count[m.ID], want)
			}
		}
	}
}

func TestPlaceKeepsEveryMemberUnderItsBound(t *testing.T) {
	ms := []Member{{1, 1}, {2, 1}, {3, 2}, {4, 0.5}, {5, 3}, {6, 1}}
	total := 8.5
	keys := testKeys(20_000)
	for _, factor := range []float64{1, 1.02, 1.1, 1.25} {
		t.Run(fmt.Sprint(factor), func(t *testing.T) {
			// Few vnodes make plain hashing uneven, so the bound has work to do.
			r := New(ms, Options{VnodesPerWeight: 3, LoadFactor: factor})
			count := map[uint32]int{}
			for _, id := range r.Place(keys) {
				count[id]++
			}
			placed := 0
			for _, m := range ms {
				bound := int(math.Ceil(factor * m.Weight / total * float64(len(keys))))
				if count[m.ID] > bound {
					t.Errorf("member %d holds %d keys, over its bound %d", m.ID, count[m.ID], bound)
				}
				placed += count[m.ID]
			}
			if placed != len(keys) {
				t.Errorf("%d of %d keys placed on members", placed, len(keys))
			}
		})
	}
}

// TestPlaceSendsOverflowToNextMemberWithRoom checks Place against a direct
// reading of its rule: in hash order, the first member met clockwise that has
// room.
func TestPlaceSendsOverflowToNextMemberWithRoom(t *testing.T) {
	ms := []Member{{1, 1}, {2, 1}, {3, 2}, {4, 0.5}}
	r := New(ms, Options{VnodesPerWeight: 4, LoadFactor: 1.05})
	keys := testKeys(4000)
	got := r.Place(keys)

	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if ha, hb := Hash(keys[a]), Hash(keys[b]); ha != hb {
			if ha < hb {
				return -1
			}
			return 1
		}
		return 0
	})
	room := map[uint32]int{}
	for _, m := range ms {
		room[m.ID] = int(math.Ceil(1.05 * m.Weight / 4.5 * float64(len(keys))))
	}
	moved := 0
	for _, i := range order {
		candidates := r.LookupN(keys[i], len(ms))
		for _, id := range candidates {
			if room[id] > 0 {
				room[id]--
				if got[i] != id {
					t.Fatalf("key %q placed on %d, want %d (first with room in %v)", keys[i], got[i], id, candidates)
				}
				if id != candidates[0] {
					moved++
				}
				break
			}
		}
	}
	if moved == 0 {
		t.Fatal("no key overflowed: the test does not exercise the bound")
	}
}

func TestPlaceEqualsLookupWhenBoundIsLoose(t *testing.T) {
	r := New(equalMembers(10), Options{VnodesPerWeight: 20, LoadFactor: 10})
	keys := testKeys(5000)
	if !slices.Equal(r.Place(keys), lookupAll(t, r, keys)) {
		t.Error("Place moved keys although no member reached its bound")
	}
}

func TestRemovingMemberMovesOnlyItsKeysToTheirSuccessor(t *testing.T) {
	ms := equalMembers(10)
	before := New(ms, Options{VnodesPerWeight: 100})
	after := New(slices.Delete(slices.Clone(ms), 3, 4), Options{VnodesPerWeight: 100}) // removes ID 4
	keys := testKeys(20_000)
	old, cur := lookupAll(t, before, keys), lookupAll(t, after, keys)
	moved := 0
	for i, k := range keys {
		switch {
		case old[i] != 4 && cur[i] != old[i]:
			t.Fatalf("key %q moved from %d to %d, but only member 4 left", k, old[i], cur[i])
		case old[i] == 4:
			moved++
			if want := before.LookupN(k, 2)[1]; cur[i] != want {
				t.Fatalf("key %q of the leaving member went to %d, want its successor %d", k, cur[i], want)
			}
		}
	}
	if moved == 0 {
		t.Fatal("member 4 held no keys: the test checks nothing")
	}
}

func TestAddingMemberMovesKeysOnlyToIt(t *testing.T) {
	ms := equalMembers(10)
	before := New(ms, Options{VnodesPerWeight: 100})
	after := New(append(slices.Clone(ms), Member{ID: 11, Weight: 2}), Options{VnodesPerWeight: 100})
	keys := testKeys(20_000)
	old, cur := lookupAll(t, before, keys), lookupAll(t, after, keys)
	gained := 0
	for i, k := range keys {
		if cur[i] != old[i] && cur[i] != 11 {
			t.Fatalf("key %q moved from %d to %d, not to the new member", k, old[i], cur[i])
		}
		if cur[i] == 11 {
			gained++
		}
	}
	if gained == 0 {
		t.Fatal("the new member got no keys")
	}
}

func TestLookupNListsDistinctSuccessors(t *testing.T) {
	r := New(equalMembers(5), Options{VnodesPerWeight: 10})
	tests := []struct {
		n, want int
	}{
		{-1, 0}, {0, 0}, {1, 1}, {3, 3}, {5, 5}, {9, 5},
	}
	for _, k := range testKeys(50) {
		owner, _ := r.Lookup(k)
		for _, tt := range tests {
			got := r.LookupN(k, tt.n)
			if len(got) != tt.want {
				t.Fatalf("LookupN(%q, %d) returned %d members, want %d", k, tt.n, len(got), tt.want)
			}
			if len(got) > 0 && got[0] != owner {
				t.Fatalf("LookupN(%q, %d)[0] = %d, want the owner %d", k, tt.n, got[0], owner)
			}
			sorted := slices.Clone(got)
			slices.Sort(sorted)
			if len(slices.Compact(sorted)) != len(got) {
				t.Fatalf("LookupN(%q, %d) = %v repeats a member", k, tt.n, got)
			}
		}
	}
}

func TestPlaceUnitsOfWeightOneIsPlace(t *testing.T) {
	r := New([]Member{{ID: 1, Weight: 1}, {ID: 2, Weight: 2}, {ID: 3, Weight: 0.5}}, Options{VnodesPerWeight: 50, LoadFactor: 1.05})
	keys := make([]string, 3000)
	units := make([]Unit, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprintf("host/repo%d", i)
		units[i] = Unit{Name: keys[i], Weight: 1}
	}
	got, _ := r.PlaceUnits(units)
	if want := r.Place(keys); !slices.Equal(got, want) {
		t.Fatal("PlaceUnits with weights of 1 differs from Place")
	}
}

func TestPlaceUnitsKeepsTheBoundAndPlacesHeavyUnits(t *testing.T) {
	r := New([]Member{{ID: 1, Weight: 1}, {ID: 2, Weight: 1}, {ID: 3, Weight: 1}}, Options{})
	var units []Unit
	for i := range 900 {
		units = append(units, Unit{Name: fmt.Sprintf("k%d", i), Weight: 1})
	}
	for i := range 30 {
		units = append(units, Unit{Name: fmt.Sprintf("net%d", i), Weight: 10})
	}
	units = append(units, Unit{Name: "huge", Weight: 2000}) // more than any bound
	owners, _ := r.PlaceUnits(units)
	for i, o := range owners {
		if o == 0 {
			t.Fatalf("unit %s unplaced", units[i].Name)
		}
	}
	// Without the huge unit, every member is within its bound.
	owners, _ = r.PlaceUnits(units[:len(units)-1])
	load := map[uint32]int{}
	for i, o := range owners {
		load[o] += units[i].Weight
	}
	bound := int(math.Ceil(DefaultLoadFactor / 3 * 1200))
	for id, l := range load {
		if l > bound {
			t.Errorf("member %d holds %d, over its bound %d", id, l, bound)
		}
	}
	// The input order does not matter.
	rev := slices.Clone(units[:len(units)-1])
	slices.Reverse(rev)
	again, _ := r.PlaceUnits(rev)
	for i := range rev {
		if again[i] != owners[len(rev)-1-i] {
			t.Fatalf("unit %s placed differently in another order", rev[i].Name)
		}
	}
}

// PlaceReplicas gives each unit n distinct members, and no member more
// weight than its bound, even with a few units far heavier than the rest.
func TestPlaceReplicasIsDistinctAndBoundedByWeight(t *testing.T) {
	r := New([]Member{{ID: 1, Weight: 1}, {ID: 2, Weight: 1}, {ID: 3, Weight: 1}, {ID: 4, Weight: 1}, {ID: 5, Weight: 2}}, Options{LoadFactor: 1.1})
	units := make([]Unit, 5000)
	sum := 0
	for i := range units {
		units[i] = Unit{Name: fmt.Sprintf("u%d", i), Weight: 1 + i%10}
		if i%1000 == 0 {
			units[i].Weight = 500
		}
		sum += units[i].Weight
	}
	out, k := r.PlaceReplicas(units, 2)
	if k != 2 || len(out) != 2*len(units) {
		t.Fatalf("k = %d, %d owners, want 2 and %d", k, len(out), 2*len(units))
	}
	held := map[uint32]int{}
	for i, u := range units {
		a, b := out[2*i], out[2*i+1]
		if a == b || a == 0 || b == 0 {
			t.Fatalf("%s: members %d and %d, want two distinct", u.Name, a, b)
		}
		held[a] += u.Weight
		held[b] += u.Weight
	}
	for id, w := range held {
		share := 1.0 / 6
		if id == 5 {
			share = 2.0 / 6
		}
		if bound := math.Ceil(1.1 * share * 2 * float64(sum)); float64(w) > bound {
			t.Errorf("member %d holds %d, above its bound %.0f", id, w, bound)
		}
	}
	if out, k := New(nil, Options{}).PlaceReplicas(units, 2); out != nil || k != 0 {
		t.Errorf("without members: %d owners, k = %d", len(out), k)
	}
	if _, k := New([]Member{{ID: 7, Weight: 1}}, Options{}).PlaceReplicas(units, 2); k != 1 {
		t.Errorf("one member, 2 replicas: k = %d, want 1", k)
	}
}

// heavyTailedUnits returns n units whose weights are drawn from a
// lognormal of the given sigma (seeded), as repository sizes are.
func heavyTailedUnits(n int, sigma float64) []Unit {
	rng := rand.New(rand.NewPCG(1, 2))
	units := make([]Unit, n)
	for i := range units {
		units[i] = Unit{Name: fmt.Sprintf("host.example/r/%d", i), Weight: 1 + int(1000*math.Exp(sigma*rng.NormFloat64()))}
	}
	return units
}

// With sizes heavy-tailed enough that the bound binds, a lost member's
// replicas move and, besides them, only a few heavy units: no light unit
// that the lost member did not hold changes members, and the replicas
// made stay within 1.05 of the lost member's. Placed in the order of
// the units' hashes, the bound's cascade moved 1.2 times as many.
func TestPlaceReplicasLossMovesTheLostMembersReplicas(t *testing.T) {
	units := heavyTailedUnits(20000, 2.5)
	members := equalMembers(20)
	before, k, displaced := New(members, Options{LoadFactor: 1.1}).PlaceReplicasDisplaced(units, 2)
	if !displaced {
		t.Fatal("the bound displaced nothing: the test does not test the bound")
	}
	after, _, _ := New(members[1:], Options{LoadFactor: 1.1}).PlaceReplicasDisplaced(units, 2)
	var sum float64
	for _, u := range units {
		sum += float64(u.Weight)
	}
	heavy := sum * 2 / 20 / heavyShare
	lost, made, lightMoved := 0, 0, 0
	for i, u := range units {
		was, is := before[i*k:(i+1)*k], after[i*k:(i+1)*k]
		if slices.Contains(was, 1) {
			lost++
		}
		for _, id := range is {
			if !slices.Contains(was, id) {
				made++
			}
		}
		if !slices.Contains(was, 1) && float64(u.Weight) <= heavy && !slices.Equal(slices.Sorted(slices.Values(was)), slices.Sorted(slices.Values(is))) {
			lightMoved++
		}
	}
	if lightMoved > 0 {
		t.Errorf("%d light units that member 1 did not hold changed members", lightMoved)
	}
	if float64(made) > 1.05*float64(lost) {
		t.Errorf("the loss made %d replicas, %.3f times the %d member 1 held", made, float64(made)/float64(lost), lost)
	}
}
