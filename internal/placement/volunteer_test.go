package placement

import (
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// perNode counts the assigns of ds by node.
func perNode(ds []Decision) map[uint32]int {
	out := map[uint32]int{}
	for _, d := range ds {
		if d.Kind == Assign {
			out[d.Node]++
		}
	}
	return out
}

// TestACappedNodeGetsFewerClonesAtOnce: at the reference bandwidth a node
// gets MaxInFlight clones at once; capped at a fifth of it, a fifth; capped
// far below, one; and each confirmed clone frees one slot.
func TestACappedNodeGetsFewerClonesAtOnce(t *testing.T) {
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: 50, ReferenceBandwidth: 100e6 / 8})
	e.SetMembers(equalMembers(1, 2, 3, 4))
	e.SetBandwidth(2, 20e6/8) // 20 Mbit/s
	e.SetBandwidth(3, 1000)   // 8 kbit/s
	e.SetBandwidth(4, 1e9)    // above the reference: no fewer
	e.AddKeys(testKeys(2000)...)
	got := perNode(e.Decisions())
	want := map[uint32]int{1: 50, 2: 10, 3: 1, 4: 50}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("node %d got %d clones at once, want %d (all: %v)", id, got[id], n, got)
		}
	}
	// Node 3 confirms its one: it gets one more, and only one.
	var k3 repokey.Key
	for _, k := range testKeys(2000) {
		if _, target, _ := e.Owner(k); target == 3 {
			if e.keys[mustIndex(t, e, k)].flags&flagSent != 0 {
				k3 = k
				break
			}
		}
	}
	e.Confirm(3, k3)
	if got := perNode(e.Decisions()); got[3] != 1 || len(got) != 1 {
		t.Fatalf("after node 3 confirmed a clone: %v; want one more clone for node 3", got)
	}
	// The cap lifted: node 3 gets the full share.
	e.SetBandwidth(3, 0)
	if got := perNode(e.Decisions()); got[3] != 49 {
		t.Fatalf("after node 3's cap was lifted: %v; want 49 more for node 3", got)
	}
}

func mustIndex(t *testing.T, e *Engine, key repokey.Key) int32 {
	t.Helper()
	i, ok := e.index.get(e.keys, key)
	if !ok {
		t.Fatalf("key %q unknown", key)
	}
	return i
}

// TestARestingNodeGetsNoFirstClonesWhileAnotherCan: the keys that would be
// a resting node's first clones go to the active node, and come back to
// the resting node, make-before-break, once its hours begin.
func TestARestingNodeGetsNoFirstClonesWhileAnotherCan(t *testing.T) {
	e := New(fewVnodes)
	e.SetMembers(equalMembers(1, 2))
	e.SetResting(2, true)
	keys := testKeys(300)
	e.AddKeys(keys...)
	ds := settle(t, e)
	if got := perNode(ds); got[2] != 0 || got[1] != len(keys) {
		t.Fatalf("while node 2 rests: assigns %v; want every key on node 1", got)
	}
	// Its hours begin: its share comes back to it, and node 1 drops it.
	e.SetResting(2, false)
	ds = settle(t, e)
	back := perNode(ds)[2]
	if back < len(keys)/4 {
		t.Fatalf("node 2 active again got %d keys back; want its share of %d", back, len(keys))
	}
	drops := 0
	for _, d := range ds {
		if d.Kind == Drop && d.Node == 1 {
			drops++
		}
	}
	if drops != back {
		t.Fatalf("node 1 dropped %d keys, node 2 took %d back", drops, back)
	}
	load := e.Load()
	if load[1]+load[2] != len(keys) || load[2] != back {
		t.Fatalf("owners: %v", load)
	}
	// The same placement as if node 2 had never rested.
	f := New(fewVnodes)
	f.SetMembers(equalMembers(1, 2))
	f.AddKeys(keys...)
	settle(t, f)
	if a, b := owners(t, e, keys), owners(t, f, keys); changed(a, b) != 0 {
		t.Fatalf("%d keys placed otherwise than without the rest", changed(a, b))
	}
}

// TestRestingNodesTakeClonesWhenNoOtherNodeCan: every member rests, so
// the keys go where they would, paced as usual.
func TestRestingNodesTakeClonesWhenNoOtherNodeCan(t *testing.T) {
	e := New(fewVnodes)
	e.SetMembers(equalMembers(1, 2))
	e.SetResting(1, true)
	e.SetResting(2, true)
	keys := testKeys(300)
	e.AddKeys(keys...)
	settle(t, e)
	if load := e.Load(); load[1] == 0 || load[2] == 0 || load[1]+load[2] != len(keys) {
		t.Fatalf("with every node resting: owners %v; want the keys spread over both", load)
	}
}

// TestAMoveToARestingNodeWaitsForItsHours: a key its old owner serves is
// not sent to a resting node; it is when the node's hours begin.
func TestAMoveToARestingNodeWaitsForItsHours(t *testing.T) {
	e := New(fewVnodes)
	keys := testKeys(300)
	e.SetMembers(equalMembers(1))
	e.AddKeys(keys...)
	settle(t, e)
	e.SetResting(2, true)
	e.SetMembers(equalMembers(1, 2))
	if ds := e.Decisions(); len(ds) != 0 {
		t.Fatalf("moves to a resting node: %d decisions, want none while node 1 serves the keys", len(ds))
	}
	if e.PendingMoves() == 0 {
		t.Fatal("no move waits for node 2")
	}
	e.SetResting(2, false)
	if got := perNode(e.Decisions()); got[2] == 0 {
		t.Fatalf("node 2 active: assigns %v; want its moves", got)
	}
}
