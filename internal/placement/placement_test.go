package placement

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

func testKeys(n int) []repokey.Key {
	keys := make([]repokey.Key, n)
	for i := range keys {
		keys[i] = repokey.Key(repokey.Key(fmt.Sprintf("github.com/org%d/repo-%d", i%997, i)))
	}
	return keys
}

func equalMembers(ids ...uint32) []ring.Member {
	ms := make([]ring.Member, len(ids))
	for i, id := range ids {
		ms[i] = ring.Member{ID: id, Weight: 1}
	}
	return ms
}

func span(from, to uint32) []uint32 {
	var ids []uint32
	for id := from; id <= to; id++ {
		ids = append(ids, id)
	}
	return ids
}

// fewVnodes keeps rings small in tests that do not measure balance.
var fewVnodes = Config{VnodesPerWeight: 200}

// settle plays nodes that confirm every assign at once until the engine has
// nothing more to say, and returns every decision it took.
func settle(t testing.TB, e *Engine) []Decision {
	t.Helper()
	var all []Decision
	for range 1_000_000 {
		ds := e.Decisions()
		if len(ds) == 0 {
			return all
		}
		all = append(all, ds...)
		for _, d := range ds {
			if d.Kind == Assign {
				e.Confirm(d.Node, d.Key)
			}
		}
	}
	t.Fatal("decisions never stop")
	return nil
}

func owners(t *testing.T, e *Engine, keys []repokey.Key) []uint32 {
	t.Helper()
	out := make([]uint32, len(keys))
	for i, k := range keys {
		o, _, ok := e.Owner(k)
		if !ok {
			t.Fatalf("key %q unknown", k)
		}
		out[i] = o
	}
	return out
}

func count(ds []Decision, kind Kind) int {
	n := 0
	for _, d := range ds {
		if d.Kind == kind {
			n++
		}
	}
	return n
}

// minMoved is the fewest keys that must change owner to go from the loads
// of before to those of after: what the nodes that gained keys gained.
func minMoved(before, after []uint32) int {
	gain := map[uint32]int{}
	for i := range before {
		gain[before[i]]--
		gain[after[i]]++
	}
	n := 0
	for _, g := range gain {
		n += max(g, 0)
	}
	return n
}

func changed(before, after []uint32) int {
	n := 0
	for i := range before {
		if before[i] != after[i] {
			n++
		}
	}
	return n
}

func TestSameMembersKeysAndOverridesGiveSameOwnersWhateverTheEventOrder(t *testing.T) {
	keys := testKeys(20_000)
	final := equalMembers(span(1, 12)...)
	final[3].Weight = 3

	// A: keys first, members in two steps, a hand-back in between.
	a := New(fewVnodes)
	a.AddKeys(keys...)
	a.SetMembers(final[:8])
	settle(t, a)
	a.SetMembers(final)
	a.HandBack(5, keys[:100]...)
	settle(t, a)

	// B: members first, keys in shuffled chunks, the same hand-back, moves
	// confirmed in a random order with failures.
	b := New(fewVnodes)
	b.SetMembers(final)
	shuffled := slices.Clone(keys)
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b.AddKeys(shuffled[:7000]...)
	settle(t, b)
	b.AddKeys(shuffled[7000:]...)
	b.HandBack(5, keys[:100]...)
	var retrying []Decision // failed clones, which their nodes retry on their own
	for range 100_000 {
		ds := b.Decisions()
		if len(ds) == 0 {
			if len(retrying) == 0 {
				break
			}
			for _, d := range retrying {
				b.Confirm(d.Node, d.Key)
			}
			retrying = nil
			continue
		}
		rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		for _, d := range ds {
			if d.Kind != Assign {
				continue
			}
			if rng.IntN(4) == 0 {
				b.CloneFailed(d.Node, d.Key)
				retrying = append(retrying, d)
			} else {
				b.Confirm(d.Node, d.Key)
			}
		}
	}

	if a.PendingMoves() != 0 || b.PendingMoves() != 0 {
		t.Fatalf("pending moves after settling: %d and %d", a.PendingMoves(), b.PendingMoves())
	}
	oa, ob := owners(t, a, keys), owners(t, b, keys)
	if d := changed(oa, ob); d != 0 {
		t.Errorf("%d of %d keys have different owners after different event orders", d, len(keys))
	}
	for _, k := range keys[:100] {
		if o, _, _ := a.Owner(k); o == 5 {
			t.Errorf("key %q handed back by node 5 is still on it", k)
		}
	}
}

func TestJoinAndLeaveMoveAboutTheMinimum(t *testing.T) {
	keys := testKeys(100_000)
	base := equalMembers(span(1, 20)...)
	tests := []struct {
		name  string
		after []ring.Member
	}{
		{"a member joins", append(slices.Clone(base), ring.Member{ID: 21, Weight: 1})},
		{"a heavy member joins", append(slices.Clone(base), ring.Member{ID: 21, Weight: 4})},
		{"a member leaves", base[1:]},
		{"a member's weight halves", append([]ring.Member{{ID: 1, Weight: 0.5}}, base[1:]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New(Config{})
			e.AddKeys(keys...)
			e.SetMembers(base)
			settle(t, e)
			before := owners(t, e, keys)
			e.SetMembers(tt.after)
			settle(t, e)
			after := owners(t, e, keys)
			moved, must := changed(before, after), minMoved(before, after)
			if must == 0 || float64(moved)/float64(must) > 1.1 {
				t.Errorf("moved %d keys, minimum %d: ratio above 1.1", moved, must)
			}
		})
	}
}

func TestLoadOfEqualMembersStaysNearTheMean(t *testing.T) {
	keys := testKeys(200_000)
	e := New(Config{})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(span(1, 100)...))
	settle(t, e)
	load := e.Load()
	mean := float64(len(keys)) / 100
	most := 0
	for _, n := range load {
		most = max(most, n)
	}
	// 1.10 is the target at 1M keys (see the benchmarks); 200k keys add
	// some sampling noise.
	if r := float64(most) / mean; r > 1.12 {
		t.Errorf("max/mean load %.3f, want <= 1.12", r)
	}
}

func TestMixedCapacitiesGetTheirShare(t *testing.T) {
	keys := testKeys(200_000)
	var ms []ring.Member
	total := 0.0
	for i := range 40 {
		w := []float64{0.5, 1, 2, 4}[i%4]
		ms = append(ms, ring.Member{ID: uint32(i + 1), Weight: w})
		total += w
	}
	e := New(Config{})
	e.AddKeys(keys...)
	e.SetMembers(ms)
	settle(t, e)
	load := e.Load()
	for _, m := range ms {
		want := m.Weight / total * float64(len(keys))
		if err := math.Abs(float64(load[m.ID])-want) / want; err > 0.10 {
			t.Errorf("member %d (weight %g) holds %d keys, its share is %.0f: %.1f%% off", m.ID, m.Weight, load[m.ID], want, 100*err)
		}
	}
}

func TestMoveIsMakeBeforeBreak(t *testing.T) {
	keys := testKeys(2000)
	e := New(fewVnodes)
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2, 3))
	settle(t, e)

	e.SetMembers(equalMembers(1, 2, 3, 4))
	ds := e.Decisions()
	if count(ds, Drop) != 0 {
		t.Fatalf("drops before any clone was confirmed: %v", ds)
	}
	var moving []Decision
	for _, d := range ds {
		if d.Kind != Assign || d.Node != 4 || d.Urgent || d.From == 0 {
			t.Fatalf("decision %+v: want a non-urgent assign to node 4 from the current owner", d)
		}
		owner, target, _ := e.Owner(d.Key)
		if owner != d.From || target != 4 {
			t.Fatalf("key %q during its move: owner %d target %d, want owner %d target 4", d.Key, owner, target, d.From)
		}
		moving = append(moving, d)
	}
	if len(moving) == 0 {
		t.Fatal("no key moves to the new member")
	}

	d := moving[0]
	e.Confirm(d.Node, d.Key)
	got := e.Decisions()
	if !slices.Contains(got, Decision{Kind: Drop, Node: d.From, Key: d.Key}) {
		t.Errorf("after the target confirmed %q, decisions %v lack a drop at the old owner %d", d.Key, got, d.From)
	}
	if owner, target, _ := e.Owner(d.Key); owner != 4 || target != 0 {
		t.Errorf("after confirm: owner %d target %d, want 4 and 0", owner, target)
	}
}

func TestKeysOfAGoneOwnerAreAssignedAtOnceUrgentFromTheOldOwner(t *testing.T) {
	keys := testKeys(5000)
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: 10_000})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2, 3, 4))
	settle(t, e)
	before := owners(t, e, keys)

	// Node 5 joins, and before its moves are released node 4 is gone: the
	// keys of node 4 must pass before the moves to node 5.
	e.SetMembers(equalMembers(1, 2, 3, 4, 5))
	e.SetMembers(equalMembers(1, 2, 3, 5))
	ds := e.Decisions()
	gone := 0
	for i, k := range keys {
		if before[i] != 4 {
			continue
		}
		gone++
		_, target, _ := e.Owner(k)
		if target == 0 || target == 4 {
			t.Fatalf("key %q of gone node 4 has target %d", k, target)
		}
	}
	seenNormal := map[uint32]bool{}
	urgent := 0
	for _, d := range ds {
		if d.Kind != Assign {
			continue
		}
		if d.Urgent {
			urgent++
			if d.From != 4 {
				t.Errorf("urgent assign %+v: From %d, want the gone owner 4", d, d.From)
			}
			if seenNormal[d.Node] {
				t.Errorf("urgent assign %+v came after a normal one to the same node", d)
			}
		} else {
			seenNormal[d.Node] = true
			if d.From == 4 {
				t.Errorf("assign %+v from the gone node is not urgent", d)
			}
		}
	}
	if urgent != gone {
		t.Errorf("%d urgent assigns, want one per key of the gone node (%d)", urgent, gone)
	}
}

func TestPacingNeverExceedsMaxInFlightPerNode(t *testing.T) {
	keys := testKeys(20_000)
	const limit = 7
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: limit})
	e.AddKeys(keys...)
	rng := rand.New(rand.NewPCG(3, 4))
	e.SetMembers(equalMembers(span(1, 10)...))
	outstanding := map[Decision]bool{}
	retrying := map[Decision]bool{} // failed clones, which their nodes retry on their own
	perNode := map[uint32]int{}
	for step := 0; ; step++ {
		switch step {
		case 50:
			e.SetMembers(equalMembers(span(1, 11)...))
		case 100:
			e.SetMembers(equalMembers(span(2, 11)...))
		}
		for _, d := range e.Decisions() {
			key := Decision{Node: d.Node, Key: d.Key}
			switch d.Kind {
			case Assign:
				outstanding[key] = true
				perNode[d.Node]++
				if perNode[d.Node] > limit {
					t.Fatalf("step %d: node %d has %d clones outstanding, limit %d", step, d.Node, perNode[d.Node], limit)
				}
			case Drop:
				if outstanding[key] {
					delete(outstanding, key)
					perNode[d.Node]--
				}
			}
		}
		for id, n := range e.InFlight() {
			if n > limit || n != perNode[id] {
				t.Fatalf("step %d: InFlight says node %d has %d, decisions say %d", step, id, n, perNode[id])
			}
		}
		if len(outstanding) == 0 && len(retrying) == 0 && step > 100 {
			break
		}
		// Nodes answer some of their clones, in any order, and some of
		// their retries succeed.
		for k := range retrying {
			if rng.IntN(3) == 0 {
				e.Confirm(k.Node, k.Key)
				delete(retrying, k)
			}
		}
		for k := range outstanding {
			if rng.IntN(3) > 0 {
				continue
			}
			if rng.IntN(5) == 0 {
				e.CloneFailed(k.Node, k.Key)
				retrying[k] = true
			} else {
				e.Confirm(k.Node, k.Key)
			}
			delete(outstanding, k)
			perNode[k.Node]--
		}
	}
	if e.PendingMoves() != 0 {
		t.Errorf("%d moves pending at the end", e.PendingMoves())
	}
}

func TestCloneFailedFreesTheSlotAndKeepsTheMoveWithItsNode(t *testing.T) {
	keys := testKeys(500)
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: 1})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1))
	ds := e.Decisions()
	if len(ds) != 1 || ds[0].Kind != Assign {
		t.Fatalf("decisions %v: want one assign (MaxInFlight 1)", ds)
	}
	first := ds[0].Key
	e.CloneFailed(1, first)
	e.CloneFailed(1, first) // the node's next retry failed too
	if _, target, _ := e.Owner(first); target != 1 {
		t.Errorf("after a failed clone the target is %d, want 1 (still pending)", target)
	}
	if n := e.PendingMoves(); n != len(keys) {
		t.Errorf("%d pending moves, want %d", n, len(keys))
	}
	if n := e.InFlight()[1]; n != 0 {
		t.Errorf("%d clones in flight after the only one failed, want 0", n)
	}
	ds = e.Decisions()
	if len(ds) != 1 || ds[0].Key == first {
		t.Fatalf("after a failure, decisions %v: want the next key; the node retries the failed one itself", ds)
	}
	// The node's own retry succeeds: the move is done, without a slot.
	e.Confirm(1, first)
	if owner, target, _ := e.Owner(first); owner != 1 || target != 0 {
		t.Errorf("after the retry confirmed: owner %d, target %d", owner, target)
	}
	if n := e.InFlight()[1]; n != 1 {
		t.Errorf("%d clones in flight, want the one sent after the failure", n)
	}
}

// Upstreams that are down cannot hold every clone slot: with three slots
// and ten clones that fail, a repository added later is assigned at once.
func TestFailingClonesDoNotBlockANewRepository(t *testing.T) {
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: 3})
	e.SetMembers(equalMembers(1))
	var dead []repokey.Key
	for i := range 10 {
		dead = append(dead, repokey.Key(fmt.Sprintf("down.example/a/r%d", i)))
	}
	e.AddKeys(dead...)
	for range 10 {
		ds := e.Decisions()
		if len(ds) == 0 {
			break
		}
		if len(ds) > 3 {
			t.Fatalf("%d assigns at once, over the 3 slots", len(ds))
		}
		for _, d := range ds {
			e.CloneFailed(d.Node, d.Key)
		}
	}
	e.AddKeys("up.example/a/healthy")
	ds := e.Decisions()
	if len(ds) != 1 || ds[0].Key != "up.example/a/healthy" {
		t.Fatalf("decisions %v: want the healthy repository assigned at once", ds)
	}
	for _, k := range dead {
		if _, target, _ := e.Owner(k); target != 1 {
			t.Errorf("%s: target %d, want 1 (its node retries it)", k, target)
		}
	}
}

func TestReturnWithinGraceCausesNoDecisions(t *testing.T) {
	keys := testKeys(5000)
	e := New(fewVnodes)
	e.AddKeys(keys...)
	ms := equalMembers(1, 2, 3)
	e.SetMembers(ms)
	settle(t, e)

	// Membership keeps a suspect node a member with the same weight: the
	// coordinator feeds the same set again, then the node's inventory.
	e.SetMembers(slices.Clone(ms))
	var held []repokey.Key
	for _, k := range keys {
		if o, _, _ := e.Owner(k); o == 2 {
			held = append(held, k)
		}
	}
	e.Hold(2, held...)
	if ds := e.Decisions(); len(ds) != 0 {
		t.Errorf("a node back within grace caused %d decisions, want none: %v", len(ds), ds[:min(5, len(ds))])
	}
}

func TestRestartFromSnapshotMovesNothing(t *testing.T) {
	keys := testKeys(20_000)
	ms := equalMembers(span(1, 10)...)
	e := New(fewVnodes)
	e.AddKeys(keys...)
	e.SetMembers(ms)
	settle(t, e)
	e.HandBack(3, keys[:50]...)
	settle(t, e)
	// A move under way: part of it sent, part still queued.
	e.SetMembers(append(slices.Clone(ms), ring.Member{ID: 11, Weight: 1}))
	sent := e.Decisions()

	snap := e.Snapshot()
	r, err := Restore(fewVnodes, snap, keys)
	if err != nil {
		t.Fatal(err)
	}
	r.SetMembers(append(slices.Clone(ms), ring.Member{ID: 11, Weight: 1}))
	for _, k := range keys {
		o1, t1, _ := e.Owner(k)
		o2, t2, _ := r.Owner(k)
		if o1 != o2 || t1 != t2 {
			t.Fatalf("key %q: owner/target %d/%d before the restart, %d/%d after", k, o1, t1, o2, t2)
		}
	}
	if got, want := r.InFlight(), e.InFlight(); !equalMaps(got, want) {
		t.Errorf("in flight after restore %v, want %v", got, want)
	}
	// The restored engine goes on with the queued part only: the same
	// decisions as the original.
	want, got := e.Decisions(), r.Decisions()
	if !slices.Equal(got, want) {
		t.Errorf("restored engine decided %d things, original %d", len(got), len(want))
	}
	for _, d := range sent {
		e.Confirm(d.Node, d.Key)
		r.Confirm(d.Node, d.Key)
	}
	settle(t, e)
	settle(t, r)
	if d := changed(owners(t, e, keys), owners(t, r, keys)); d != 0 {
		t.Errorf("%d keys end with different owners", d)
	}

	// Settled: a restart decides nothing at all, and the snapshot does not
	// grow with the keys.
	snap = r.Snapshot()
	if len(snap) > 4096 {
		t.Errorf("snapshot of a settled fleet is %d bytes", len(snap))
	}
	r2, err := Restore(fewVnodes, snap, keys)
	if err != nil {
		t.Fatal(err)
	}
	r2.SetMembers(append(slices.Clone(ms), ring.Member{ID: 11, Weight: 1}))
	if ds := r2.Decisions(); len(ds) != 0 {
		t.Errorf("restart of a settled fleet: %d decisions, want none", len(ds))
	}
	if d := changed(owners(t, r, keys), owners(t, r2, keys)); d != 0 {
		t.Errorf("%d keys changed owner across the restart", d)
	}
}

func equalMaps(a, b map[uint32]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestRestoreRefusesDamagedSnapshots(t *testing.T) {
	keys := []repokey.Key{"a/b", "c/d", "k"}
	e := New(fewVnodes)
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2))
	good := e.Snapshot()
	// A snapshot of keys: its header, then the given bytes.
	ofVersion := func(magic string, b ...byte) []byte {
		h := binary.AppendUvarint([]byte(magic), uint64(len(keys)))
		h = binary.LittleEndian.AppendUint64(h, e.digest)
		return append(h, b...)
	}
	of := func(b ...byte) []byte { return ofVersion(snapshotMagic, b...) }
	one := []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f} // 1.0
	tests := []struct {
		name string
		data []byte
		keys []repokey.Key
	}{
		{"empty", nil, keys},
		{"wrong magic", []byte("gfplace\x03"), keys},
		{"truncated", good[:len(good)-1], keys},
		{"trailing bytes", append(slices.Clone(good), 0), keys},
		{"another key set", good, []repokey.Key{"a/b", "c/d", "x"}},
		{"fewer keys", good, keys[:2]},
		{"member ID 0", of(slices.Concat([]byte{1, 0}, one, []byte{0, 0})...), keys},
		{"negative weight", of(1, 1, 0, 0, 0, 0, 0, 0, 0xf0, 0xbf, 0, 0), keys},
		{"members out of order", of(slices.Concat([]byte{2, 2}, one, []byte{1}, one, []byte{0, 0})...), keys},
		{"huge count", of(0xff, 0xff, 0xff, 0xff, 0x0f), keys},
		{"override of an unknown key", of(0, 1, 1, 'x', 1, 1, 0), keys},
		{"override that avoids nothing", of(0, 1, 1, 'k', 0, 0), keys},
		{"record of an unknown key", of(0, 0, 1, 0, 1, 'x', 1, 0, 0), keys},
		{"target without move state", of(0, 0, 1, 0, 1, 'k', 1, 2, 0), keys},
		{"move state without target", of(0, 0, 1, 0, 1, 'k', 1, 0, 2), keys},
		{"record sharing more than the key before has", of(0, 0, 1, 1, 1, 'k', 1, 2, 2), keys},
		{"version 1 record of an unknown key", ofVersion(snapshotMagicV1, 0, 0, 1, 1, 'x', 1, 0, 0), keys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Restore(fewVnodes, tt.data, tt.keys); err == nil {
				t.Error("Restore accepted it")
			}
		})
	}
	if _, err := Restore(fewVnodes, good, []repokey.Key{"k", "c/d", "a/b", "k"}); err != nil {
		t.Errorf("Restore refused a good snapshot with its keys in another order: %v", err)
	}
	if _, err := Restore(fewVnodes, of(0, 0, 1, 0, 1, 'k', 1, 2, 2), keys); err != nil {
		t.Errorf("Restore refused a hand-made record of a clone in flight: %v", err)
	}
	// Two records, front-coded (they share no prefix).
	if _, err := Restore(fewVnodes, of(0, 0, 2, 0, 3, 'a', '/', 'b', 1, 2, 2, 0, 3, 'c', '/', 'd', 1, 2, 1), keys); err != nil {
		t.Errorf("Restore refused two hand-made records: %v", err)
	}
	// A snapshot of version 1 (keys written whole), as an older
	// coordinator stored it, is still read.
	e1, err := Restore(fewVnodes, ofVersion(snapshotMagicV1, 0, 0, 1, 1, 'k', 1, 2, 2), keys)
	if err != nil {
		t.Fatalf("Restore refused a version 1 snapshot: %v", err)
	}
	if owner, target, _ := e1.Owner("k"); owner != 1 || target != 2 {
		t.Errorf("version 1 record restored as owner %d target %d, want 1 and 2", owner, target)
	}
}

func FuzzRestore(f *testing.F) {
	e := New(fewVnodes)
	keys := testKeys(50)
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2, 3))
	settle(f, e)
	e.HandBack(2, keys[:5]...)
	f.Add(e.Snapshot())
	e.SetMembers(equalMembers(1, 3, 4))
	e.Decisions()
	f.Add(e.Snapshot())
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Restore(fewVnodes, data, keys)
		if err != nil {
			return
		}
		// Whatever it restored must stay consistent.
		r.SetMembers(equalMembers(1, 2, 3))
		settle(t, r)
		if r.PendingMoves() != 0 {
			t.Errorf("%d moves pending after settling", r.PendingMoves())
		}
	})
}

func TestHoldReconcilesAnInventory(t *testing.T) {
	keys := testKeys(3000)
	e := New(fewVnodes)
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2))
	settle(t, e)
	e.SetMembers(equalMembers(1, 2, 3))
	var own1, own2, toward3 repokey.Key
	for _, k := range keys {
		switch o, target, _ := e.Owner(k); {
		case target == 3 && toward3 == "":
			toward3 = k
		case target != 0:
		case o == 1 && own1 == "":
			own1 = k
		case o == 2 && own2 == "":
			own2 = k
		}
	}
	e.Decisions()

	tests := []struct {
		name      string
		node      uint32
		key       repokey.Key
		want      []Decision
		wantOwner uint32
	}{
		{"a key it owns stays", 1, own1, nil, 1},
		{"a key moving to it completes without a clone", 3, toward3, []Decision{{Kind: Drop, Node: 0, Key: toward3}}, 3},
		{"a key another member owns is dropped", 1, own2, []Decision{{Kind: Drop, Node: 1, Key: own2}}, 2},
		{"an unknown key is dropped", 2, "gitlab.com/x/y", []Decision{{Kind: Drop, Node: 2, Key: "gitlab.com/x/y"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wasOwner uint32
			if tt.key == toward3 {
				wasOwner, _, _ = e.Owner(tt.key)
				tt.want[0].Node = wasOwner
			}
			e.Hold(tt.node, tt.key)
			var got []Decision
			for _, d := range e.Decisions() {
				if d.Key == tt.key {
					got = append(got, d)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("decisions %v, want %v", got, tt.want)
			}
			if o, _, _ := e.Owner(tt.key); o != tt.wantOwner {
				t.Errorf("owner %d, want %d", o, tt.wantOwner)
			}
		})
	}
}

func TestHoldAdoptsKeysNobodyServes(t *testing.T) {
	keys := testKeys(1000)
	e := New(fewVnodes)
	e.AddKeys(keys...)
	// Before any members (a cold start in warm-up), inventories are adopted.
	e.Hold(7, keys...)
	if ds := e.Decisions(); len(ds) != 0 {
		t.Fatalf("holding before members: %d decisions", len(ds))
	}
	e.SetMembers(equalMembers(7, 8))
	ds := e.Decisions()
	for _, d := range ds {
		if d.Kind != Assign || d.Node != 8 || d.From != 7 || d.Urgent {
			t.Fatalf("decision %+v: want only make-before-break moves from 7 to 8", d)
		}
	}
	load := 0
	for _, k := range keys {
		if o, target, _ := e.Owner(k); o == 7 && target == 0 {
			load++
		}
	}
	if load == 0 || load == len(keys) {
		t.Errorf("node 7 keeps %d of %d keys, want its share", load, len(keys))
	}
}

func TestRemovedKeysAreDroppedAtOwnerAndTarget(t *testing.T) {
	keys := testKeys(2000)
	e := New(fewVnodes)
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2))
	settle(t, e)
	e.SetMembers(equalMembers(1, 2, 3))
	var moving repokey.Key
	for _, d := range e.Decisions() {
		if d.Kind == Assign {
			moving = d.Key
			break
		}
	}
	owner, _, _ := e.Owner(moving)
	settled := keys[0]
	if settled == moving {
		settled = keys[1]
	}
	settledOwner, _, _ := e.Owner(settled)
	before := e.InFlight()[3]

	e.RemoveKeys(moving, settled, "never/added")
	ds := e.Decisions()
	for _, want := range []Decision{
		{Kind: Drop, Node: owner, Key: moving},
		{Kind: Drop, Node: 3, Key: moving},
		{Kind: Drop, Node: settledOwner, Key: settled},
	} {
		if !slices.Contains(ds, want) {
			t.Errorf("decisions lack %+v", want)
		}
	}
	if _, _, ok := e.Owner(moving); ok {
		t.Error("a removed key is still known")
	}
	// The freed slot went to the next key in line.
	if got := e.InFlight()[3]; got != before {
		t.Errorf("node 3 has %d clones in flight, want %d (the slot reused)", got, before)
	}
	settle(t, e)
	for _, k := range keys {
		if k == moving || k == settled {
			continue
		}
		if o, _, ok := e.Owner(k); !ok || o == 0 {
			t.Fatalf("key %q lost its owner after removals", k)
		}
	}
}

func TestFullDiskTakesNoNewClonesHandsBackAndGetsKeysBackPaced(t *testing.T) {
	keys := testKeys(10_000)
	const limit = 20
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: limit})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2, 3, 4))
	settle(t, e)
	original := owners(t, e, keys)

	// A node that joins with a full disk gets no clones: its moves wait
	// and the old owners keep serving.
	e.SetDisk(5, 95, 100)
	e.SetMembers(equalMembers(1, 2, 3, 4, 5))
	if ds := e.Decisions(); len(ds) != 0 {
		t.Fatalf("a full node's join caused decisions: %v", ds[:min(3, len(ds))])
	}
	if e.PendingMoves() == 0 {
		t.Fatal("no moves wait for the full node")
	}
	e.SetDisk(5, 50, 100)
	ds := e.Decisions()
	if n := count(ds, Assign); n != limit {
		t.Errorf("room on node 5: %d assigns, want %d (paced)", n, limit)
	}
	for _, d := range ds {
		e.Confirm(d.Node, d.Key)
	}
	settle(t, e)
	joined := owners(t, e, keys)

	// Node 3 fills up and hands back some of its keys: each goes to the
	// next member that is not full, make-before-break.
	e.SetDisk(3, 90, 100)
	e.SetDisk(4, 90, 100)
	var back []repokey.Key
	for i, k := range keys {
		if joined[i] == 3 && len(back) < 100 {
			back = append(back, k)
		}
	}
	e.HandBack(3, back...)
	ds = settle(t, e)
	for _, d := range ds {
		if d.Kind == Assign && (d.Node == 3 || d.Node == 4) {
			t.Fatalf("assign %+v to a full node", d)
		}
	}
	for _, k := range back {
		if o, _, _ := e.Owner(k); o == 3 || o == 4 {
			t.Errorf("handed-back key %q is on full node %d", k, o)
		}
		if !slices.Contains(ds, Decision{Kind: Drop, Node: 3, Key: k}) {
			t.Errorf("node 3 was not told to drop %q once it was moved", k)
		}
	}

	// Between the marks nothing comes back; below the low mark the keys
	// return, no more than the node's free slots at a time.
	e.SetDisk(3, 80, 100)
	if ds := e.Decisions(); len(ds) != 0 {
		t.Errorf("disk between the marks: %d decisions, want none", len(ds))
	}
	e.SetDisk(3, 40, 100)
	returned := 0
	for round := 0; ; round++ {
		ds := e.Decisions()
		if len(ds) == 0 {
			break
		}
		assigns := 0
		for _, d := range ds {
			if d.Kind == Assign {
				assigns++
				e.Confirm(d.Node, d.Key)
			}
		}
		if assigns > limit {
			t.Fatalf("round %d: %d keys sent back to node 3 at once, limit %d", round, assigns, limit)
		}
		returned += assigns
	}
	if returned != len(back) {
		t.Errorf("%d keys returned to node 3, want %d", returned, len(back))
	}
	if d := changed(joined, owners(t, e, keys)); d != 0 {
		t.Errorf("%d keys are not back where they were before the disk filled", d)
	}
	if len(e.Snapshot()) > 1024 {
		t.Error("overrides are still remembered after the node got its keys back")
	}
	// The join moved only what node 5 took.
	if moved, must := changed(original, joined), minMoved(original, joined); moved != must {
		t.Errorf("the join moved %d keys, minimum %d", moved, must)
	}
}

func TestKeysNobodyServesAvoidAFullDisk(t *testing.T) {
	keys := testKeys(10_000)
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: 100_000})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2, 3, 4))
	settle(t, e)
	e.SetDisk(3, 99, 100)

	// Node 2 is gone: none of its keys may wait for full node 3.
	e.SetMembers(equalMembers(1, 3, 4))
	ds := e.Decisions()
	urgent := 0
	for _, d := range ds {
		if d.Kind == Assign && d.Node == 3 {
			t.Fatalf("assign %+v to the full node", d)
		}
		if d.Urgent {
			urgent++
		}
	}
	if urgent == 0 || e.PendingMoves() != urgent {
		t.Errorf("%d urgent assigns, %d pending moves: every key of the gone node must be assigned now", urgent, e.PendingMoves())
	}
	// New keys too.
	e.AddKeys(testKeys(12_000)[10_000:]...)
	for _, d := range e.Decisions() {
		if d.Kind == Assign && d.Node == 3 {
			t.Fatalf("new key assigned to the full node: %+v", d)
		}
	}
}

func TestDiskMarks(t *testing.T) {
	tests := []struct {
		name         string
		report       bool
		used         uint64 // of 100
		takesClones  bool
		getsKeysBack bool
	}{
		{"below the low mark", true, 50, true, true},
		{"at the low mark", true, 75, true, false},
		{"between the marks", true, 80, true, false},
		{"at the high mark", true, 85, true, false},
		{"above the high mark", true, 86, false, false},
		{"no report since it was full", false, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New(Config{VnodesPerWeight: 200, MaxInFlight: 1000})
			keys := testKeys(1000)
			e.AddKeys(keys...)
			e.SetMembers(equalMembers(1, 2, 3))
			settle(t, e)
			var handed []repokey.Key
			for _, k := range keys {
				if o, _, _ := e.Owner(k); o == 1 && len(handed) < 10 {
					handed = append(handed, k)
				}
			}
			e.SetDisk(1, 90, 100)
			e.HandBack(1, handed...)
			settle(t, e)
			if tt.report {
				e.SetDisk(1, tt.used, 100)
			}
			// Node 2 is gone: some of its keys are for node 1.
			e.SetMembers(equalMembers(1, 3))
			took, back := false, false
			for _, d := range e.Decisions() {
				if d.Kind == Assign && d.Node == 1 {
					if slices.Contains(handed, d.Key) {
						back = true
					} else {
						took = true
					}
				}
			}
			if took != tt.takesClones {
				t.Errorf("node 1 took new clones: %v, want %v", took, tt.takesClones)
			}
			if back != tt.getsKeysBack {
				t.Errorf("handed-back keys returned: %v, want %v", back, tt.getsKeysBack)
			}
		})
	}
}
