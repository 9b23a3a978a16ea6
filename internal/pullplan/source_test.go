package pullplan

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A repository the mirror does not hold is copied from a peer (a join, a
// lost replica's new one); one held that agrees with the owner is pulled
// from the owner, as one whose copy has just started to differ.
func TestARepositoryNotHeldIsCopiedFromAPeer(t *testing.T) {
	p := newPlan()
	p.Seen(owner("new", "d1", ""), t0)
	p.Seen(owner("held", "d2", "d1"), t0)
	for _, c := range []struct {
		key  string
		held bool
		want Source
	}{{"new", false, FromPeer}, {"held", true, FromOwner}} {
		if got := p.Source(repokey.Key(c.key), c.held, t0.Add(time.Hour)); got != c.want {
			t.Errorf("%s (held %v): from %v, want %v", c.key, c.held, got, c.want)
		}
	}
}

// A copy that differs from the verified digest is repaired from a peer
// only when a pull from the owner left it off and RepairAfter has passed
// since it started to differ; the repair's pull falls due then, with no
// new state; a copy the peer brought to the verified digest is settled.
func TestACopyThatDiffersIsRepairedFromAPeerOnceAPullFromItsOwnerLeftItOff(t *testing.T) {
	p := New(Config{HintWait: 3 * time.Minute, Jitter: fullWait{}, RepairAfter: 10 * time.Minute})
	p.Seen(owner("a", "d1", "d0"), t0)
	next(t, p, t0, "a")
	if got := p.Source("a", true, t0); got != FromOwner {
		t.Fatalf("the first pull of a copy that differs: from %v, want the owner", got)
	}
	at := t0.Add(time.Minute)
	p.Serves("a", "d0", FromOwner, at) // the owner's pull changed nothing
	p.Ended("a", "d1", Pulled, at)
	if !p.Diverging("a") {
		t.Fatal("a copy the owner's pull left off is not diverging")
	}
	next(t, p, t0.Add(10*time.Minute-time.Second), "")
	if w := p.NextWake(at).Pull; !w.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("the repair falls due at %v, want %v", w.Sub(t0), 10*time.Minute)
	}
	due := t0.Add(10 * time.Minute)
	next(t, p, due, "a")
	if got := p.Source("a", true, due); got != FromPeer {
		t.Fatalf("after %v, from %v, want a peer", due.Sub(t0), got)
	}
	p.Serves("a", "d1", FromPeer, due)
	p.Ended("a", "d1", Pulled, due)
	if p.Diverging("a") || p.IsPending("a") {
		t.Fatalf("after the peer's copy of the verified digest: diverging %v, pending %v; want neither", p.Diverging("a"), p.IsPending("a"))
	}
}

// A pull from the owner that brings the copy to the verified digest ends
// the divergence; a new verified digest starts its wait again; a peer that
// had no copy of it (the pull fell back) does too.
func TestTheWaitForARepairStartsWithEachVerifiedDigest(t *testing.T) {
	p := New(Config{HintWait: 3 * time.Minute, Jitter: fullWait{}, RepairAfter: 10 * time.Minute})
	p.Seen(owner("fixed", "d1", "d0"), t0)
	p.Serves("fixed", "d1", FromOwner, t0)
	if p.Diverging("fixed") {
		t.Error("a copy the owner's pull fixed is still diverging")
	}

	p.Seen(owner("moved", "d1", "d0"), t0)
	p.Serves("moved", "d0", FromOwner, t0)
	p.Seen(owner("moved", "d2", "d0"), t0.Add(9*time.Minute))
	if got := p.Source("moved", true, t0.Add(11*time.Minute)); got != FromOwner {
		t.Errorf("2 minutes after a new verified digest, no owner's pull since: from %v, want the owner", got)
	}
	p.Serves("moved", "d0", FromOwner, t0.Add(10*time.Minute))
	if got := p.Source("moved", true, t0.Add(19*time.Minute)); got != FromPeer {
		t.Errorf("10 minutes after the new verified digest, an owner's pull since: from %v, want a peer", got)
	}
	p.Serves("moved", "d0", FromPeer, t0.Add(19*time.Minute)) // no peer had d2
	if got := p.Source("moved", true, t0.Add(20*time.Minute)); got != FromOwner {
		t.Errorf("after a peer copy that fell back: from %v, want the owner", got)
	}

	p.Seen(owner("gone", "d1", "d0"), t0)
	p.Removed("gone")
	if p.Diverging("gone") {
		t.Error("a removed repository is still diverging")
	}
}

// Peer copies wait for a slot off the queue, so the pulls from owners go
// on; each freed slot queues the key that waited longest, and a key
// removed while it waited is skipped.
func TestPeerCopiesWaitForASlotInTurnWhilePullsGoOn(t *testing.T) {
	p := newPlan()
	for _, k := range []string{"a", "b", "c", "d"} {
		p.Seen(owner(repokey.Key(k), "d1", ""), t0)
	}
	next(t, p, t0, "a")
	p.WaitMove("a")
	next(t, p, t0, "b")
	p.WaitMove("b")
	next(t, p, t0, "c")
	p.WaitMove("c")
	p.Removed("b")
	next(t, p, t0, "d") // a pull goes on while the copies wait
	next(t, p, t0, "")
	for _, want := range []string{"a", "c"} {
		k, ok := p.MoveFreed()
		if !ok || k != repokey.Key(want) {
			t.Fatalf("a freed slot released %q %v, want %s", k, ok, want)
		}
		next(t, p, t0, repokey.Key(want))
	}
	if k, ok := p.MoveFreed(); ok {
		t.Fatalf("a freed slot released %s with none waiting", k)
	}
}
