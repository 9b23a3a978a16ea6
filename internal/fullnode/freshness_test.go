package fullnode

import (
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/repoview"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

const (
	hintKey = "github.com/a/b"
	oldRefs = "0000000000000000000000000000000a"
	newRefs = "0000000000000000000000000000000b"
)

func TestCurrentIsDerivedFromVerifiedAt(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	base := freshness{served: true, verifiedAt: t0, digest: newRefs, ownerDigest: newRefs, ownerCheck: t0.Add(-time.Minute)}
	for _, c := range []struct {
		name string
		edit func(*freshness)
		want bool
	}{
		{"verified and the owner agrees", func(*freshness) {}, true},
		{"never verified, although the owner agrees", func(s *freshness) { s.verifiedAt = time.Time{} }, false},
		{"not served", func(s *freshness) { s.served = false }, false},
		{"a change heard of, not yet served", func(s *freshness) { s.hinted = true }, false},
		{"an empty advertisement waits for its confirmation", func(s *freshness) { s.emptying = true }, false},
		{"the owner saw other refs after verified_at", func(s *freshness) { s.ownerDigest, s.ownerCheck = oldRefs, t0.Add(time.Minute) }, false},
		{"the owner saw other refs within verified_at's second", func(s *freshness) { s.ownerDigest, s.ownerCheck = oldRefs, t0.Add(time.Second/2) }, true},
		{"the owner saw other refs before verified_at", func(s *freshness) { s.ownerDigest = oldRefs }, true},
		{"the owner's other refs are known stale", func(s *freshness) {
			s.ownerDigest, s.ownerCheck, s.staleOwner = oldRefs, t0.Add(time.Minute), oldRefs
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := base
			c.edit(&s)
			if got := s.current(); got != c.want {
				t.Fatalf("current %v, want %v", got, c.want)
			}
		})
	}
}

// The owner's check that found the upstream advertising no refs (held by
// the mirror's empty guard until a later check confirms it) makes the
// repository not current while it is the last word on it.
func TestAnEmptyAdvertisementUnderConfirmationIsNotCurrent(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	for _, c := range []struct {
		name  string
		state repostate.State
		class repostate.Class
		want  bool
	}{
		{"ok", repostate.OK, repostate.NoClass, true},
		{"failing with an empty advertisement", repostate.Failing, repostate.ClassEmpty, false},
		{"failing otherwise", repostate.Failing, repostate.ClassUnreachable, true},
	} {
		in := classInput{Input: repoview.Input{State: c.state, Class: c.class, Digest: newRefs,
			LastCheck: t0.Add(time.Minute).UnixMilli(), VerifiedAt: uint32(t0.Unix())}}
		if got := in.freshness(newRefs, true).current(); got != c.want {
			t.Errorf("%s: current %v, want %v", c.name, got, c.want)
		}
	}
}

// Two reports of one stale claim that arrive at once (the coordinator's
// state and its resend) are one stale report: the hint book decides under
// the full node's lock, whatever the interleaving.
func TestAStaleClaimReportedTwiceAtOnceIsCountedOnce(t *testing.T) {
	f := benchFullNode(t, 0)
	clk := f.clk.(*clock.Fake)
	const owner = 9
	f.states([]*fleetv1.RepoState{{Key: hintKey, Url: "https://" + hintKey, Owner: owner, State: "ok", Digest: oldRefs, LastCheckMs: clk.Now().UnixMilli()}})
	f.n.SetDigest(hintKey, newRefs) // the full node fetched the change from the upstream itself
	f.mu.Lock()
	f.plan.Removed(hintKey) // no pull queued
	f.plan.Ensure(hintKey, clk.Now(), oldRefs, owner)
	f.plan.Checked(hintKey, clk.Now(), true, newRefs)
	f.mu.Unlock()
	// Two stale reports of the owner's (two checks) arrive at once.
	var wg sync.WaitGroup
	for i := range 2 {
		claim := &fleetv1.RepoState{Key: hintKey, Url: "https://" + hintKey, Owner: owner, State: "ok", Digest: oldRefs,
			LastCheckMs: clk.Now().Add(time.Duration(i+2) * time.Minute).UnixMilli()}
		wg.Go(func() { f.states([]*fleetv1.RepoState{claim}) })
	}
	wg.Wait()
	f.mu.Lock()
	claims := len(f.plan.Tick(clk.Now()).Stale)
	pending := f.plan.IsPending(hintKey)
	f.mu.Unlock()
	if claims != 1 {
		t.Fatalf("%d stale reports queued, want 1", claims)
	}
	if pending {
		t.Fatal("the owner's known-stale refs were queued for a pull")
	}
	f.setVerified(hintKey, clk.Now())
	f.mu.Lock()
	in := f.freshInput(hintKey)
	f.mu.Unlock()
	if !in.freshness(newRefs, true).current() {
		t.Fatal("serving what the upstream has while the owner reports known-stale refs: not current")
	}
	clk.Advance(time.Hour)
	r := f.backend.repo(hintKey, f.view.Get(hintKey), clk.Now())
	if r.VerifiedAt == nil || r.StalenessSeconds != 3600 {
		t.Fatalf("verified_at %v, staleness %v s; want set, 3600 s", r.VerifiedAt, r.StalenessSeconds)
	}
}
