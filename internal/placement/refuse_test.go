package placement

import (
	"maps"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// playRound answers every assign of ds: node refuser refuses what it is
// given, the others confirm. It returns the keys refused.
func playRound(e *Engine, ds []Decision, refuser uint32) []repokey.Key {
	var refused []repokey.Key
	for _, d := range ds {
		if d.Kind != Assign {
			continue
		}
		if d.Node == refuser {
			e.Refuse(d.Node, d.Key)
			refused = append(refused, d.Key)
			continue
		}
		e.Confirm(d.Node, d.Key)
	}
	return refused
}

func TestARefusedKeyGoesToAnotherMemberAndIsNeverOfferedAgain(t *testing.T) {
	keys := testKeys(300)
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: 5})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2, 3))
	refused := map[repokey.Key]bool{}
	offers := map[repokey.Key]int{} // assigns of a key to node 2
	for round := 0; ; round++ {
		if round > 10_000 {
			t.Fatal("decisions never stop: a refused key is offered again and again")
		}
		ds := e.Decisions()
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if d.Kind == Assign && d.Node == 2 {
				offers[d.Key]++
			}
		}
		for _, k := range playRound(e, ds, 2) {
			refused[k] = true
		}
	}
	if len(refused) < 50 {
		t.Fatalf("node 2 refused only %d keys: the test proves less than it says", len(refused))
	}
	for k, n := range offers {
		if n != 1 {
			t.Errorf("%s was offered to the refusing node %d times, want once", k, n)
		}
	}
	for _, k := range keys {
		o, target, _ := e.Owner(k)
		if o == 0 || o == 2 || target != 0 {
			t.Errorf("%s: owner %d, target %d; want a settled owner other than the refusing node", k, o, target)
		}
		if e.Unplaceable(k) {
			t.Errorf("%s is unplaceable although two members take it", k)
		}
	}
	if e.Refuse(2, slices.Sorted(maps.Keys(refused))[0]) {
		t.Error("a repeated refusal is reported as new")
	}

	// The node's policy changes (a new session): its keys come back to it,
	// make-before-break.
	lifted := e.PolicyChanged(2)
	if len(lifted) != len(refused) {
		t.Fatalf("lifted %d refusals, want %d", len(lifted), len(refused))
	}
	back := map[repokey.Key]bool{}
	for {
		ds := e.Decisions()
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if d.Kind == Drop && d.Node == 2 {
				t.Errorf("node 2 told to drop %s", d.Key)
			}
			if d.Kind == Assign {
				if d.Node != 2 || !refused[d.Key] || d.From == 0 {
					t.Errorf("after the policy changed: %+v, want moves of the refused keys to node 2", d)
				}
				back[d.Key] = true
			}
		}
		playRound(e, ds, 0)
	}
	if len(back) != len(refused) {
		t.Errorf("%d of %d refused keys came back to node 2", len(back), len(refused))
	}
}

func TestARefusalFreesTheSlotAtOnce(t *testing.T) {
	keys := testKeys(200)
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: 1})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2))
	var first repokey.Key
	for _, d := range e.Decisions() {
		if d.Kind == Assign && d.Node == 1 {
			first = d.Key
		}
	}
	if first == "" {
		t.Fatal("node 1 got no assign")
	}
	if !e.Refuse(1, first) {
		t.Fatal("a first refusal is not reported as new")
	}
	var next bool
	for _, d := range e.Decisions() {
		switch {
		case d.Kind == Assign && d.Node == 1 && d.Key != first:
			next = true
		case d.Kind == Assign && d.Key == first:
			t.Errorf("the refused key was assigned at once to node %d, whose slot is taken (MaxInFlight 1)", d.Node)
		case d.Kind == Drop:
			t.Errorf("%+v: the refusing node holds nothing to drop", d)
		}
	}
	if !next {
		t.Error("the refusing node's slot was not freed for its next key")
	}
	if _, target, _ := e.Owner(first); target != 2 {
		t.Errorf("the refused key targets %d, want 2", target)
	}
}

func TestAKeyEveryMemberRefusesIsUnplaceableUntilAPolicyChanges(t *testing.T) {
	e := New(fewVnodes)
	e.AddKeys("example.org/a/b")
	e.SetMembers(equalMembers(1, 2))
	for range 3 {
		ds := e.Decisions()
		if len(ds) != 1 || ds[0].Kind != Assign {
			t.Fatalf("decisions %v: want one assign", ds)
		}
		e.Refuse(ds[0].Node, ds[0].Key)
		if e.Unplaceable("example.org/a/b") {
			break
		}
	}
	if !e.Unplaceable("example.org/a/b") || e.UnplaceableCount() != 1 {
		t.Fatalf("refused by both members: unplaceable %v, count %d", e.Unplaceable("example.org/a/b"), e.UnplaceableCount())
	}
	if ds := e.Decisions(); len(ds) != 0 {
		t.Fatalf("an unplaceable key still brings decisions: %v", ds)
	}
	if owner, target, _ := e.Owner("example.org/a/b"); owner != 0 || target != 0 || e.PendingMoves() != 0 {
		t.Errorf("owner %d, target %d, %d moves pending: want none", owner, target, e.PendingMoves())
	}
	// Members change: still nobody to take it.
	e.SetMembers([]ring.Member{{ID: 1, Weight: 2}, {ID: 2, Weight: 1}})
	if ds := e.Decisions(); len(ds) != 0 || !e.Unplaceable("example.org/a/b") {
		t.Fatalf("after a weight change: decisions %v, unplaceable %v", ds, e.Unplaceable("example.org/a/b"))
	}
	e.PolicyChanged(2)
	ds := e.Decisions()
	if len(ds) != 1 || ds[0] != (Decision{Kind: Assign, Node: 2, Key: "example.org/a/b"}) {
		t.Fatalf("after node 2's policy changed: %v, want it assigned to node 2", ds)
	}
	if e.Unplaceable("example.org/a/b") || e.UnplaceableCount() != 0 {
		t.Error("still unplaceable after a policy change")
	}
}

func TestAnOwnerThatRefusesKeepsTheKeyUntilAnotherConfirms(t *testing.T) {
	e := New(fewVnodes)
	e.AddKeys(testKeys(50)...)
	e.SetMembers(equalMembers(1, 2))
	settle(t, e)
	var key repokey.Key
	for _, k := range testKeys(50) {
		if o, _, _ := e.Owner(k); o == 1 {
			key = k
			break
		}
	}
	// Node 1 restarted with a stricter policy and refuses what it owned.
	e.Refuse(1, key)
	ds := e.Decisions()
	if len(ds) != 1 || ds[0] != (Decision{Kind: Assign, Node: 2, Key: key, From: 1}) {
		t.Fatalf("decisions %v: want a move of %s to node 2 from node 1", ds, key)
	}
	if o, _, _ := e.Owner(key); o != 1 {
		t.Errorf("owner %d before the new owner confirmed, want 1", o)
	}
	e.Confirm(2, key)
	if ds := e.Decisions(); len(ds) != 1 || ds[0] != (Decision{Kind: Drop, Node: 1, Key: key}) {
		t.Errorf("decisions %v: want node 1 told to drop %s", ds, key)
	}

	// The last member refuses too: the key stays where it is, unplaceable.
	e.Refuse(2, key)
	if ds := e.Decisions(); len(ds) != 0 {
		t.Errorf("decisions %v after every member refused", ds)
	}
	if o, _, _ := e.Owner(key); o != 2 || !e.Unplaceable(key) {
		t.Errorf("owner %d, unplaceable %v: want the copy kept at 2, unplaceable", o, e.Unplaceable(key))
	}
}

func TestRefusalsOfANodeThatLeftAreForgotten(t *testing.T) {
	e := New(fewVnodes)
	e.AddKeys("example.org/a/b")
	e.SetMembers(equalMembers(1, 2))
	ds := e.Decisions()
	e.Refuse(ds[0].Node, ds[0].Key)
	if len(e.Refused()) != 1 {
		t.Fatalf("refused keys %v, want one", e.Refused())
	}
	e.SetMembers(equalMembers(3 - ds[0].Node))
	if len(e.Refused()) != 0 {
		t.Errorf("refused keys %v after the refusing node left, want none", e.Refused())
	}
	if e.Refuse(9, "example.org/a/b") {
		t.Error("a refusal from a node that is not a member is recorded")
	}
}
