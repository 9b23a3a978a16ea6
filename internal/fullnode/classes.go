package fullnode

import (
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/repoview"
)

// A repository's class (repoview.Class) is what the counters and indexes
// of the view depend on: its state as the API shows it (the owner's, or
// the mirror's corrupt/repairing while it is broken), its owner, and
// whether it is current. Every change of an input (the view, a held
// digest, a broken state, a hint) is followed by a reclass of the key,
// which reads the inputs afresh; reclasses are serialized, so the last one
// leaves the counters true.

// repoTotals is what /metrics reports of the repositories.
type repoTotals struct {
	byState map[repostate.State]int
	total   int
	current int
}

// totals returns the counters: O(states).
func (f *Node) totals() repoTotals {
	f.mu.Lock()
	defer f.mu.Unlock()
	return repoTotals{byState: f.counts.ByState(), total: f.view.Len(), current: f.counts.Current()}
}

// classOf is key's class as the API shows the repository (backend.repo):
// current as freshness.current says (served, verified, no newer change
// known). The disk is looked at only when the rest says current.
func (f *Node) classOf(key repokey.Key, st classInput) repoview.Class {
	cl := repoview.Class{State: st.State, Owner: st.Owner, Verified: repoview.VerifiedMinute(int64(st.VerifiedAt) * 1000),
		ErrClass: st.Class}
	if broken, ok := f.n.BrokenState(key); ok {
		cl.State = broken
		return cl
	}
	d, held := f.n.Digest(key)
	fr := st.freshness(d, held && d != "")
	cl.Current = fr.current() && f.held(key)
	if !cl.Current && !(held && f.held(key)) {
		cl.Current = st.currentElsewhere()
	}
	return cl
}

// classInput is what a repository's class depends on, read under f.mu:
// the view's part (repoview.View.Input) and the hints' part from the full
// node's plan (package pullplan), without building its whole state.
type classInput struct {
	repoview.Input
	hinted     bool   // pullplan.Plan.HintPending
	staleOwner string // pullplan.Plan.Stale
	// Another replica holds it (repoview.View.HeldElsewhere): confirmed,
	// and with the recorded digest.
	elsewhere, elsewhereCurrent bool
}

// currentElsewhere tells whether the repository, which this node does
// not serve, is current on the full tier: another replica holds the
// recorded digest, which it verified against the upstream before it
// served it, and no change is heard of since.
func (in classInput) currentElsewhere() bool {
	return in.elsewhereCurrent && !in.hinted && in.State == repostate.OK
}

// freshness is what current depends on, given the digest the full node
// serves (served: it holds the repository).
func (in classInput) freshness(digest string, served bool) freshness {
	return freshness{served: served, verifiedAt: fromUnixSeconds(in.VerifiedAt), digest: digest, ownerDigest: in.Digest,
		ownerCheck: msTime0(in.LastCheck), hinted: in.hinted, staleOwner: in.staleOwner,
		emptying: in.State == repostate.Failing && in.Class == repostate.ClassEmpty}
}

// msTime0 is a time in unix ms (0: the zero time).
func msTime0(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// reclass brings the counters and indexes up to date with keys' inputs.
// It is called after each change, without f.mu held.
func (f *Node) reclass(keys ...repokey.Key) {
	if len(keys) == 0 {
		return
	}
	f.classMu.Lock()
	defer f.classMu.Unlock()
	ins := make([]classInput, len(keys))
	listed := make([]bool, len(keys))
	f.mu.Lock()
	for i, k := range keys {
		_, listed[i] = f.view.Entry(k)
		ins[i] = f.freshInput(k)
	}
	f.mu.Unlock()
	cls := make([]repoview.Class, len(keys))
	for i, k := range keys {
		if listed[i] {
			cls[i] = f.classOf(k, ins[i])
		}
	}
	f.mu.Lock()
	for i, k := range keys {
		f.counts.Set(k, cls[i], listed[i])
	}
	f.mu.Unlock()
}
