package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// pullVerified pulls key from its owner through url, applying only what the
// upstream confirms (mirror.PullVerified). When the owner served refs that
// the upstream does not show, the pull is discarded, the repository is
// fetched from the upstream itself, and each tip the upstream never had
// (it is still not in the mirror afterwards) is counted against the owner.
//
// The upstream is asked for every branch and tag, not only the refs the
// owner changed (one round trip either way, but HEAD is asked beside the
// listing, and a repository with many refs sends more bytes): the answer
// is then the whole upstream, which the repository's verified_at needs
// (afterPull). It is returned as seen.
func (f *fullNode) pullVerified(ctx context.Context, key string, st *fleetv1.RepoState, owner uint32, url string) (mirror.Result, upstreamSeen, error) {
	src := mirror.Source{URL: url, Env: f.proxyEnv()}
	var seen upstreamSeen
	list := f.upstreamRefs(st)
	whole := func(ctx context.Context, _ []string) (gitcmd.Refs, error) {
		at := f.n.clk.Now()
		refs, err := list(ctx, nil)
		seen = upstreamSeen{refs: refs, at: at, ok: err == nil}
		return refs, err
	}
	res, err := f.n.mirror.PullVerified(ctx, key, src, whole)
	if errors.Is(err, mirror.ErrPullTooLarge) {
		res, err = f.pullTooLarge(ctx, key, st, owner, err) // pullsize.go
		return res, upstreamSeen{}, err
	}
	var mm *mirror.MismatchError
	if !errors.As(err, &mm) {
		return res, seen, err
	}
	before := res.Before.Refs
	f.n.log.Warn("the owner served refs that the upstream does not show; fetching from the upstream instead",
		"key", key, "node", owner, "refs", len(mm.Mismatches))
	at := f.n.clk.Now()
	res, err = f.syncUpstream(ctx, key, st)
	if err != nil {
		return res, upstreamSeen{}, fmt.Errorf("after a mismatch with owner node %d, fetch from the upstream: %w", owner, err)
	}
	forged := f.classify(ctx, key, owner, mm.Mismatches, before, f.upstreamHas(key, st))
	f.n.log.Info("fetched from the upstream after a mismatch", "key", key, "node", owner, "forged_tips", forged)
	return res, upstreamSeen{refs: res.After, at: at, ok: true}, nil
}

// upstreamRefs asks key's upstream, then its fallbacks, for refs (all its
// branches and tags under the node's ref limits when names is nil:
// mirror.ListUpstream), each URL checked against the egress policy first.
func (f *fullNode) upstreamRefs(st *fleetv1.RepoState) mirror.UpstreamRefs {
	return func(ctx context.Context, names []string) (gitcmd.Refs, error) {
		err := errors.New("no upstream URL known")
		for _, u := range append([]string{st.GetUrl()}, st.GetFallbackUrls()...) {
			if u == "" {
				continue
			}
			if err = f.n.dialer.CheckURL(ctx, u); err != nil {
				continue
			}
			var refs gitcmd.Refs
			if refs, err = f.n.mirror.ListUpstream(ctx, st.GetKey(), u, names); err == nil {
				return refs, nil
			}
			if overLimit(err) {
				return refs, err // the same repository: a fallback says the same
			}
		}
		return gitcmd.Refs{}, err
	}
}

// upstreamHas asks key's upstream, then its fallbacks, whether it holds an
// object (mirror.UpstreamHas), each URL checked against the egress policy
// first. The first answer counts; an error only when none answers.
func (f *fullNode) upstreamHas(key string, st *fleetv1.RepoState) func(context.Context, string) (bool, error) {
	return func(ctx context.Context, oid string) (bool, error) {
		err := errors.New("no upstream URL known")
		for _, u := range append([]string{st.GetUrl()}, st.GetFallbackUrls()...) {
			if u == "" {
				continue
			}
			if err = f.n.dialer.CheckURL(ctx, u); err != nil {
				continue
			}
			var has bool
			if has, err = f.n.mirror.UpstreamHas(ctx, key, u, oid); err == nil {
				return has, nil
			}
		}
		return false, err
	}
}

// syncUpstream fetches key from its upstream, then its fallbacks, each URL
// checked against the egress policy first as a node's own checks are.
func (f *fullNode) syncUpstream(ctx context.Context, key string, st *fleetv1.RepoState) (mirror.Result, error) {
	res, err := f.n.syncUpstream(ctx, key, st.GetUrl())
	for i := 0; err != nil && i < len(st.GetFallbackUrls()) && ctx.Err() == nil; i++ {
		res, err = f.n.syncUpstream(ctx, key, st.GetFallbackUrls()[i])
	}
	return res, err
}

// classify counts a pull against owner when one of the tips it served is
// not in the mirror even now that the upstream was fetched: a tip the
// upstream never had. A tip that is there (a race with the upstream, or an
// owner that was behind) is not held against it. Nor is a tip served for a
// ref that the upstream moved or deleted since the mirror last held it
// (before, the mirror's refs before the pull): an honest owner that checked
// in between holds a commit the upstream then rewrote away, which no fetch
// of its refs brings back. Nor, last, is a tip that the upstream serves by
// its ID (upstreamHas, if not nil): a push the upstream took back, which an
// honest owner fetched in between. It returns the number of forged tips.
func (f *fullNode) classify(ctx context.Context, key string, owner uint32, ms []mirror.Mismatch, before map[string]string,
	upstreamHas func(context.Context, string) (bool, error)) int {
	forged := 0
	for _, m := range ms {
		if m.Tip == "" || m.Upstream == "" || before[m.Ref] != m.Upstream {
			continue
		}
		has, err := f.n.mirror.HasObject(ctx, key, m.Tip)
		if err != nil {
			f.n.log.Warn("could not look for the owner's tip in the mirror", "key", key, "node", owner, "tip", m.Tip, "err", err)
			continue
		}
		if !has && upstreamHas != nil {
			had, err := upstreamHas(ctx, m.Tip)
			if err != nil {
				f.n.log.Warn("could not ask the upstream for the owner's tip: not counted", "key", key, "node", owner, "tip", m.Tip, "err", err)
				continue
			}
			if had {
				f.n.log.Info("the owner's tip is a commit that the upstream took back: not a forgery", "key", key, "node", owner, "ref", m.Ref, "tip", m.Tip)
				continue
			}
		}
		if !has {
			forged++
			f.n.log.Warn("forged tip: the owner served an object that the upstream never had",
				"key", key, "node", owner, "ref", m.Ref, "tip", m.Tip, "upstream", m.Upstream)
		}
	}
	if forged == 0 {
		return 0
	}
	f.charge(ctx, &f.mismatches, owner, f.n.cfg.MismatchRevoke, func(n uint64, limit int) string {
		return fmt.Sprintf("served tips that the upstream never had in %d pulls (--mismatch-revoke %d)", n, limit)
	})
	return forged
}

// charge counts one fault of owner in ledger (a forged pull, a stale
// report) and revokes owner when the count reaches limit (0: never),
// giving reason(count, limit). It returns the count. The count and the
// decision are made together under f.mu, so that two pulls or checks that
// end at once count twice only when they are two faults.
func (f *fullNode) charge(ctx context.Context, ledger *mismatchLedger, owner uint32, limit int, reason func(uint64, int) string) uint64 {
	if f.revoke == nil {
		limit = 0 // nothing to revoke with: count only
	}
	f.mu.Lock()
	n, revoke := ledger.add(owner, limit)
	f.mu.Unlock()
	if !revoke {
		return n
	}
	why := reason(n, limit)
	if err := f.revoke(ctx, owner, why); err != nil {
		f.mu.Lock()
		ledger.revokeFailed(owner) // try again at the next fault
		f.mu.Unlock()
		f.n.log.Error("could not revoke a node", "node", owner, "reason", why, "err", err)
		return n
	}
	f.n.log.Warn("node revoked", "node", owner, "reason", why)
	return n
}

// mismatchCount is how many pulls from node served forged tips.
func (f *fullNode) mismatchCount(node uint32) uint64 {
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
