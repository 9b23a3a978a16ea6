package fullnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// pullVerified pulls key from its owner through url, applying only what the
// upstream confirms (mirror.PullVerifiedIn, in the repository's network's
// object pool). When the owner served refs that
// the upstream does not show, the pull is refused: it is discarded, the
// repository is fetched from the upstream itself, and each tip the upstream
// never had (it is still not in the mirror afterwards) is counted against
// the owner (classify). The refusal is returned beside the fetch's result,
// so that the fetch log shows the pull as refused, not as the fetch that
// replaced it.
//
// The upstream is asked for every branch and tag, not only the refs the
// owner changed (one round trip either way, but HEAD is asked beside the
// listing, and a repository with many refs sends more bytes): the answer
// is then the whole upstream, which the repository's verified_at needs
// (afterPull). It is returned as seen.
//
// Since that listing does not depend on what the owner serves, it is
// asked while the owner's refs are fetched (earlyListing), not after: the
// two round trips, to two hosts, overlap, and the owner's refs are still
// checked against an answer of the upstream's alone.
func (f *Node) pullVerified(ctx context.Context, key repokey.Key, st *fleetv1.RepoState, owner uint32, url string) (mirror.Result, upstreamSeen, *pullRefusal, error) {
	src := mirror.Source{URL: url, Env: f.proxyEnv()}
	var seen upstreamSeen
	list := f.upstreamRefs(key, st)
	early := f.earlyListing(ctx, key, st, list)
	defer early.stop()
	whole := func(ctx context.Context, _ []string) (gitcmd.Refs, error) {
		if s, ok, err := early.wait(ctx); ok {
			seen = s
			return s.refs, err
		}
		at := f.clk.Now()
		refs, err := list(ctx, nil)
		seen = upstreamSeen{refs: refs, at: at, ok: err == nil}
		return refs, err
	}
	// Into its network's pool: only what this member alone has crosses
	// the owner's tunnel, and the pool takes what was verified.
	res, err := f.mirror.PullVerifiedIn(ctx, key, st.GetNetwork(), src, whole)
	early.stop() // before a fetch from the upstream that may follow
	if errors.Is(err, mirror.ErrPullTooLarge) {
		res, err = f.pullTooLarge(ctx, key, st, owner, err) // overlimit.go
		return res, upstreamSeen{}, nil, err
	}
	var mm *mirror.MismatchError
	if !errors.As(err, &mm) {
		return res, seen, nil, err
	}
	before := res.Before.Refs
	f.log.Warn("the owner served refs that the upstream does not show; fetching from the upstream instead",
		"key", key, "node", owner, "refs", len(mm.Mismatches))
	at := f.clk.Now()
	res, err = f.syncUpstream(ctx, key, st)
	if err != nil {
		return res, upstreamSeen{}, nil, fmt.Errorf("after a mismatch with owner node %d, fetch from the upstream: %w", owner, err)
	}
	forged := f.classify(ctx, key, owner, mm.Mismatches, before, f.upstreamHas(key, st))
	f.log.Info("fetched from the upstream after a mismatch", "key", key, "node", owner, "forged_tips", forged)
	return res, upstreamSeen{refs: res.After, at: at, ok: true}, &pullRefusal{owner: owner, mismatch: mm, forged: forged, at: at}, nil
}

// listing is the upstream's listing asked at a pull's start, running
// beside the fetch from the owner (earlyListing). The zero value asks
// nothing: the pull lists the upstream when the mirror asks it to.
type listing struct {
	done   chan struct{} // closed when the listing ended
	cancel context.CancelFunc
	seen   upstreamSeen
	err    error
}

// earlyListing starts listing key's upstream at once when the owner's
// digest differs from the one served, as the pull then has changes to
// verify (the mirror asks the upstream only then): a pull with nothing to
// verify, such as one that puts the mirror in its network's pool, does
// not ask the upstream at all.
func (f *Node) earlyListing(ctx context.Context, key repokey.Key, st *fleetv1.RepoState, list mirror.UpstreamRefs) *listing {
	if served, _ := f.n.Digest(key); served == st.GetDigest() {
		return &listing{}
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &listing{done: make(chan struct{}), cancel: cancel}
	at := f.clk.Now()
	go func() {
		defer close(l.done)
		refs, err := list(ctx, nil)
		l.seen, l.err = upstreamSeen{refs: refs, at: at, ok: err == nil}, err
	}()
	return l
}

// wait returns the listing once it ended; ok is false when none was
// started, or it was stopped.
func (l *listing) wait(ctx context.Context) (upstreamSeen, bool, error) {
	if l.done == nil || l.cancel == nil {
		return upstreamSeen{}, false, nil // none, or stopped: the pull asks itself
	}
	select {
	case <-l.done:
		return l.seen, true, l.err
	case <-ctx.Done():
		return upstreamSeen{}, true, ctx.Err()
	}
}

// stop ends the listing if it still runs and waits for it; the pull then
// asks the upstream itself if it needs to.
func (l *listing) stop() {
	if l.done == nil || l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
	l.cancel = nil
}

// pullRefusal is a pull from an owner that the upstream did not confirm:
// nothing of it was applied, and the repository was fetched from the
// upstream at at instead.
type pullRefusal struct {
	owner    uint32
	mismatch *mirror.MismatchError
	forged   int // tips the upstream never had (classify)
	at       time.Time
}

// class is the refusal's public class.
func (r *pullRefusal) class() repostate.Class {
	if r.forged > 0 {
		return repostate.ClassForged
	}
	return repostate.ClassMismatch
}

// pullClass is the public class of err, a failed pull: the refusal's
// (forged, mismatch), git's, or the full node's own.
func pullClass(err error) repostate.Class {
	var r *pullRefusal
	if errors.As(err, &r) {
		return r.class()
	}
	if c := node.PublicClass(err); c != repostate.ClassOther {
		return c
	}
	return repostate.ClassInternal
}

// Error says why the pull was refused.
func (r *pullRefusal) Error() string {
	if r.forged > 0 {
		return fmt.Sprintf("pull refused: node %d served %d forged tips, which the upstream never had (%v); fetched from the upstream instead",
			r.owner, r.forged, r.mismatch)
	}
	return fmt.Sprintf("pull refused: %v; fetched from the upstream instead", r.mismatch)
}

// upstreamRefs asks key's upstream, then its fallbacks, for refs (all its
// branches and tags under the node's ref limits when names is nil:
// mirror.ListUpstream), each URL checked against the egress policy first.
func (f *Node) upstreamRefs(key repokey.Key, st *fleetv1.RepoState) mirror.UpstreamRefs {
	return func(ctx context.Context, names []string) (gitcmd.Refs, error) {
		err := errors.New("no upstream URL known")
		for _, u := range append([]string{st.GetUrl()}, st.GetFallbackUrls()...) {
			if u == "" {
				continue
			}
			if err = f.n.Dialer().CheckURL(ctx, u); err != nil {
				continue
			}
			var refs gitcmd.Refs
			if refs, err = f.mirror.ListUpstream(ctx, key, u, names); err == nil {
				return refs, nil
			}
			if node.OverLimit(err) {
				return refs, err // the same repository: a fallback says the same
			}
		}
		return gitcmd.Refs{}, err
	}
}

// upstreamHas asks key's upstream, then its fallbacks, whether it holds an
// object (mirror.UpstreamHas), each URL checked against the egress policy
// first. The first answer counts; an error only when none answers.
func (f *Node) upstreamHas(key repokey.Key, st *fleetv1.RepoState) func(context.Context, string) (bool, error) {
	return func(ctx context.Context, oid string) (bool, error) {
		err := errors.New("no upstream URL known")
		for _, u := range append([]string{st.GetUrl()}, st.GetFallbackUrls()...) {
			if u == "" {
				continue
			}
			if err = f.n.Dialer().CheckURL(ctx, u); err != nil {
				continue
			}
			var has bool
			if has, err = f.mirror.UpstreamHas(ctx, key, u, oid); err == nil {
				return has, nil
			}
		}
		return false, err
	}
}

// syncUpstream fetches key from its upstream, then its fallbacks, each URL
// checked against the egress policy first as a node's own checks are.
func (f *Node) syncUpstream(ctx context.Context, key repokey.Key, st *fleetv1.RepoState) (mirror.Result, error) {
	res, err := f.n.SyncUpstream(ctx, key, st.GetUrl())
	for i := 0; err != nil && i < len(st.GetFallbackUrls()) && ctx.Err() == nil; i++ {
		res, err = f.n.SyncUpstream(ctx, key, st.GetFallbackUrls()[i])
	}
	return res, err
}

// classify counts a pull against owner when one of the tips it served is
// not in the mirror even now that the upstream was fetched: a tip the
// upstream never had, on a ref the upstream has (a forged tip) or on one it
// never had (an injected ref). A tip that is there (a race with the
// upstream, or an owner that was behind) is not held against it. Nor is a
// tip served for a ref that the upstream moved or deleted since the mirror
// last held it (before, the mirror's refs before the pull): an honest owner
// that checked in between holds a commit the upstream then rewrote away,
// which no fetch of its refs brings back. Nor, last, is a tip that the
// upstream serves by its ID (upstreamHas, if not nil): a push the upstream
// took back, or a branch it created and deleted, which an honest owner
// fetched in between. A ref that neither the upstream nor the mirror has is
// counted only when the upstream says it lacks the tip (upstreamHas): a
// short-lived branch looks the same until it is asked.
//
// A forgery is counted once per owner, repository and tip: the same forged
// report pulled twice (at once, or again after a failure) is one fault. It
// returns the number of forged tips of this pull.
func (f *Node) classify(ctx context.Context, key repokey.Key, owner uint32, ms []mirror.Mismatch, before map[string]string,
	upstreamHas func(context.Context, string) (bool, error)) int {
	var tips []string
	for _, m := range ms {
		if m.Tip == "" || before[m.Ref] != m.Upstream {
			continue
		}
		injected := m.Upstream == ""
		has, err := f.mirror.HasObject(ctx, key, m.Tip)
		if err != nil {
			f.log.Warn("could not look for the owner's tip in the mirror", "key", key, "node", owner, "tip", m.Tip, "err", err)
			continue
		}
		if has {
			continue
		}
		if upstreamHas == nil && injected {
			continue
		}
		if upstreamHas != nil {
			had, err := upstreamHas(ctx, m.Tip)
			if err != nil {
				f.log.Warn("could not ask the upstream for the owner's tip: not counted", "key", key, "node", owner, "tip", m.Tip, "err", err)
				continue
			}
			if had {
				f.log.Info("the owner's tip is a commit that the upstream took back: not a forgery", "key", key, "node", owner, "ref", m.Ref, "tip", m.Tip)
				continue
			}
		}
		what := "forged tip: the owner served an object that the upstream never had"
		if injected {
			what = "injected ref: the owner served a ref and an object that the upstream never had"
		}
		f.log.Warn(what, "key", key, "node", owner, "ref", m.Ref, "tip", m.Tip, "upstream", m.Upstream)
		tips = append(tips, m.Tip)
	}
	if len(tips) == 0 {
		return 0
	}
	f.mu.Lock()
	fresh := f.forgeries.add(owner, key.String(), tips)
	f.mu.Unlock()
	if !fresh {
		f.log.Info("forged tips already counted against the node", "key", key, "node", owner, "tips", len(tips))
		return len(tips)
	}
	f.charge(ctx, &f.mismatches, owner, f.cfg.MismatchRevoke, func(n uint64, limit int) string {
		return fmt.Sprintf("served tips that the upstream never had in %d pulls (--mismatch-revoke %d)", n, limit)
	})
	return len(tips)
}

// maxForgeries bounds the forged tips remembered (the oldest are
// forgotten first): a node that forges past it is revoked long before at
// any sane --mismatch-revoke.
const maxForgeries = 4096

// forgerySet remembers the forged tips counted against nodes, so that a
// forgery is counted once. The zero value is ready; it is not safe for
// concurrent use.
type forgerySet struct {
	seen  map[forgery]bool
	order []forgery // oldest first
}

type forgery struct {
	node     uint32
	key, tip string
}

// add records node's forged tips of key and reports whether any of them
// is new.
func (s *forgerySet) add(node uint32, key string, tips []string) bool {
	if s.seen == nil {
		s.seen = map[forgery]bool{}
	}
	fresh := false
	for _, tip := range tips {
		g := forgery{node, key, tip}
		if s.seen[g] {
			continue
		}
		fresh = true
		s.seen[g] = true
		s.order = append(s.order, g)
		if len(s.order) > maxForgeries {
			delete(s.seen, s.order[0])
			s.order = s.order[1:]
		}
	}
	return fresh
}

// charge counts one fault of owner in ledger (a forged pull, a stale
// report), tells the coordinator owner's counts (which tells owner), and
// revokes owner when the count reaches limit (0: never), giving
// reason(count, limit). It returns the count. The count and the decision
// are made together under f.mu, so that two pulls or checks that end at
// once count twice only when they are two faults.
func (f *Node) charge(ctx context.Context, ledger *mismatchLedger, owner uint32, limit int, reason func(uint64, int) string) uint64 {
	if f.revoke == nil {
		limit = 0 // nothing to revoke with: count only
	}
	f.mu.Lock()
	n, revoke := ledger.add(owner, limit)
	standing := &fleetv1.ReportStandingRequest{NodeId: owner, Mismatches: f.mismatches.counts[owner], StaleReports: f.staleReports.counts[owner]}
	f.mu.Unlock()
	f.reportStanding(ctx, standing)
	if !revoke {
		return n
	}
	why := reason(n, limit)
	if err := f.revoke(ctx, owner, why); err != nil {
		f.mu.Lock()
		ledger.revokeFailed(owner) // try again at the next fault
		f.mu.Unlock()
		f.log.Error("could not revoke a node", "node", owner, "reason", why, "err", err)
		return n
	}
	f.log.Warn("node revoked", "node", owner, "reason", why)
	return n
}

// reportStanding tells the coordinator what this full node counted
// against a node, for the node to see; a failure is logged and the next
// fault tells again.
func (f *Node) reportStanding(ctx context.Context, st *fleetv1.ReportStandingRequest) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client, cctx, err := f.n.Coordinator(ctx)
	if err == nil {
		_, err = client.ReportStanding(cctx, st)
	}
	if err != nil {
		f.log.Info("could not tell the coordinator a node's standing; the next fault tells it", "node", st.GetNodeId(), "err", err)
	}
}

// mismatchCount is how many pulls from node served forged tips.
func (f *Node) mismatchCount(node uint32) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mismatches.counts[node]
}

// mismatchLedger counts, per node, its faults of one kind (the pulls in
// which it served forged tips, its stale reports), and says when a node
// reaches the limit of them (once per node, unless the revocation failed).
// The zero value is ready; it is not safe for concurrent use.
type mismatchLedger struct {
	counts  map[uint32]uint64
	revoked map[uint32]bool
}

// add counts one such pull from node and reports the node's count and
// whether to revoke it now (limit 0: never).
func (l *mismatchLedger) add(node uint32, limit int) (uint64, bool) {
	if l.counts == nil {
		l.counts, l.revoked = map[uint32]uint64{}, map[uint32]bool{}
	}
	l.counts[node]++
	n := l.counts[node]
	if limit <= 0 || n < uint64(limit) || l.revoked[node] {
		return n, false
	}
	l.revoked[node] = true
	return n, true
}

// revokeFailed lets the next add ask for node's revocation again.
func (l *mismatchLedger) revokeFailed(node uint32) { delete(l.revoked, node) }
