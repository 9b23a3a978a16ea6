package placement

import "testing"

// A key asked for while it waits for a slot behind a new catalog's other
// keys is assigned at once, beyond the pacing; then the pacing goes on as
// before, and a key already sent or unknown is not hurried.
func TestHurrySendsAQueuedKeyAtOnce(t *testing.T) {
	keys := testKeys(500)
	e := New(Config{VnodesPerWeight: 200, MaxInFlight: 1})
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1))
	ds := e.Decisions()
	if len(ds) != 1 {
		t.Fatalf("decisions %v: want one assign (MaxInFlight 1)", ds)
	}
	sent := ds[0].Key
	late := keys[len(keys)-1]
	if late == sent {
		late = keys[0]
	}
	if !e.Hurry(late) {
		t.Fatal("a queued key was not hurried")
	}
	ds = e.Decisions()
	if len(ds) != 1 || ds[0].Key != late || ds[0].Kind != Assign || ds[0].Node != 1 || !ds[0].Urgent {
		t.Fatalf("decisions %v: want the hurried key's urgent assign to node 1", ds)
	}
	if e.Hurry(late) || e.Hurry(sent) || e.Hurry("no/such/key") {
		t.Fatal("a key already sent, or unknown, was hurried")
	}
	if got := e.InFlight()[1]; got != 2 {
		t.Fatalf("in flight on node 1: %d, want 2 (the paced one and the hurried one)", got)
	}
	e.Confirm(1, late)
	if ds := e.Decisions(); len(ds) != 0 {
		t.Fatalf("decisions %v: the pacing must wait for the slot of the paced key", ds)
	}
	e.Confirm(1, sent)
	if ds := e.Decisions(); len(ds) != 1 || ds[0].Key == late || ds[0].Key == sent {
		t.Fatalf("decisions %v: want the next key", ds)
	}
}
