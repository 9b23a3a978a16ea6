package e2e

import (
	"testing"
	"time"
)

func TestAProgressingWaitOutlivesItsFloorAndAStalledOneDoesNot(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	b := newProgressBound(t0, 100*time.Second, 30*time.Second)
	b.observe(at(0), 0)
	b.observe(at(20), 3)
	if b.expired(at(90)) {
		t.Fatal("expired before its floor")
	}
	b.observe(at(95), 10) // still rising at the floor
	if b.expired(at(110)) {
		t.Fatal("expired at its floor while progress rose 15 s before")
	}
	b.observe(at(120), 10) // the same count is no progress
	if b.expired(at(124)) {
		t.Fatal("expired before the stall")
	}
	if !b.expired(at(125)) {
		t.Fatal("not expired 30 s after progress last rose, past the floor")
	}

	// A wait that never progresses ends at its floor, as a plain bound would.
	q := newProgressBound(t0, 100*time.Second, 30*time.Second)
	q.observe(at(0), 5)
	q.observe(at(60), 5)
	if !q.expired(at(100)) {
		t.Fatal("a stalled wait not expired at its floor")
	}
}
