package fullnode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/pullplan"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Copies between full nodes (issue 32's loss, join and repair). A full
// node that is to hold a repository it lacks, or whose copy the owner's
// pulls leave off the verified digest (pullplan's Source decides), copies
// it from another replica over the link between full nodes: the peer's
// tunnel, reached through this node's loopback proxy as owners are, git
// served read-only by the peer's runtime. The peer's refs are listed first
// and must be the verified state, the owner's digest in RepoState: a peer
// behind or ahead is passed over. The copy is then fetched into the
// repository's network pool as pulls are (a network's objects cross once)
// and applied only if it is exactly what was listed (mirror.PullVerifiedIn,
// with the listing as the reference). Neither the upstream nor the owner
// is asked anything. With no peer that serves the verified state, the pull
// falls back to the owner, verified against the upstream.
//
// At most cfg.MoveConcurrency copies run at once (--full-move-concurrency):
// a pull that is to copy while every slot is taken waits off the queue
// (pullplan's WaitMove), so pulls from owners and public serving go on.
//
// The tier's drops (TierDrop) delete a copy only when its state no longer
// names this node, this node does not own it, and a peer serves the
// verified state: a drop the coordinator ordered on a stale or racing
// decision never deletes the last copy. A drop is not a catalog removal:
// nothing is retained, and purge protection's rules for removals do not
// apply to it.

// errNoPeer is a peer copy that found no peer serving the verified state.
var errNoPeer = errors.New("no other full node serves the verified state")

// peers returns the replicas of st other than this node whose tunnels are
// up, in placement order.
func (f *Node) peers(st *fleetv1.RepoState) []uint32 {
	if f.tunnels == nil {
		return nil // not started
	}
	self := f.n.ID()
	var out []uint32
	for _, id := range st.GetReplicas() {
		if id != self && id != 0 && f.tunnels.Connected(id) {
			out = append(out, id)
		}
	}
	return out
}

// holders returns the peers (peers) that hold st's recorded state as far
// as the coordinator knows: those its replica_states do not list. A peer
// copy is tried only when one does: at a fleet's start, or when every
// other replica is new too, no peer has it, and a first pull that listed
// each peer and waited for a copy's slot (--full-move-concurrency) before
// it fell back to the owner would pace the whole first mirror at the
// copies' pace. The coordinator's word only chooses where to try: a copy
// is still checked against the verified digest (copyFromPeer).
func (f *Node) holders(st *fleetv1.RepoState) []uint32 {
	peers := f.peers(st)
	if len(peers) == 0 || len(st.GetReplicaStates()) == 0 {
		return peers
	}
	return slices.DeleteFunc(peers, func(id uint32) bool {
		return slices.ContainsFunc(st.GetReplicaStates(), func(r *fleetv1.ReplicaState) bool { return r.GetNode() == id })
	})
}

// pullSource decides where key's pull, picked by the plan at now, comes
// from: a peer only when the plan says so and a peer holds the verified
// state (holders); a repair is not made from a peer while this node
// verified its copy against the upstream after the owner's last check
// (the owner is the one behind). Caller holds f.mu.
func (f *Node) pullSource(key repokey.Key, st *fleetv1.RepoState, now time.Time) pullplan.Source {
	if st == nil || st.GetOwner() == f.n.ID() || st.GetDigest() == "" || len(f.holders(st)) == 0 {
		return pullplan.FromOwner
	}
	held := f.mirror.Has(key)
	src := f.plan.Source(key, held, now)
	if src == pullplan.FromPeer && held {
		if e, ok := f.view.Entry(key); ok && int64(e.VerifiedAt())*1000 > st.GetLastCheckMs() {
			return pullplan.FromOwner
		}
	}
	return src
}

// takeMove takes a peer copy's slot, if one is free.
func (f *Node) takeMove() bool {
	select {
	case f.moves <- struct{}{}:
		return true
	default:
		return false
	}
}

// freeMove frees a peer copy's slot; the key that waited longest for one
// is queued.
func (f *Node) freeMove() {
	<-f.moves
	f.mu.Lock()
	f.plan.MoveFreed()
	f.mu.Unlock()
	f.kick()
}

// peerURL is where this node's git reaches key on full node id: through
// the loopback proxy into id's tunnel.
func (f *Node) peerURL(id uint32, key repokey.Key) string {
	return fmt.Sprintf("http://%s/%d/%s.git", f.proxyLn.Addr().String(), id, key)
}

// copyFromPeer copies key from the first peer that holds the recorded
// state (holders), in placement order, and serves the verified state
// (st's digest), and reports the peer; errNoPeer when none does. See the
// top of this file.
func (f *Node) copyFromPeer(ctx context.Context, key repokey.Key, st *fleetv1.RepoState) (mirror.Result, uint32, error) {
	want := st.GetDigest()
	var res mirror.Result
	for _, id := range f.holders(st) {
		src := mirror.Source{URL: f.peerURL(id, key), Env: f.proxyEnv()}
		refs, err := f.mirror.ListSource(ctx, key, src)
		if err != nil {
			if ctx.Err() != nil {
				return res, 0, ctx.Err()
			}
			f.log.Info("peer copy: could not list a replica's refs; trying the next", "key", key, "node", id, "err", err)
			continue
		}
		if got := refs.Digest(); got != want {
			f.log.Info("peer copy: a replica does not serve the verified state; trying the next",
				"key", key, "node", id, "digest", got, "verified", want)
			continue
		}
		listed := func(context.Context, []string) (gitcmd.Refs, error) { return refs, nil }
		res, err = f.mirror.PullVerifiedIn(ctx, key, st.GetNetwork(), src, listed)
		if err != nil {
			if ctx.Err() != nil {
				return res, 0, ctx.Err()
			}
			f.log.Warn("peer copy failed; trying the next replica", "key", key, "node", id, "err", err)
			continue
		}
		return res, id, nil
	}
	return res, 0, errNoPeer
}

// pullFromPeer is a pull that copies key from a peer (copyFromPeer) and
// serves and reports it as a pull from the owner is; it reports false
// when no peer served the verified state, for the pull to fall back to
// the owner.
func (f *Node) pullFromPeer(ctx context.Context, key repokey.Key, st *fleetv1.RepoState) (bool, error) {
	start := f.clk.Now()
	had := f.mirror.Has(key)
	res, peer, err := f.copyFromPeer(ctx, key, st)
	if errors.Is(err, errNoPeer) {
		f.peerCopies.WithLabelValues("fell_back").Inc()
		f.log.Info("no other full node serves the verified state; pulling from the owner", "key", key, "verified", st.GetDigest())
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f.peerCopies.WithLabelValues("copied").Inc()
	e := f.n.WorkEntry(key.String(), "copy", start, res, nil)
	e.From = peer
	f.flog.Append(e)
	f.served(key, res)
	digest := res.After.Digest()
	f.log.Info("copied from a peer full node", "key", key, "node", peer, "cloned", res.Cloned, "digest", digest,
		"took", f.clk.Now().Sub(start))
	roots, rootsErr := f.mirror.Roots(ctx, key, res) // before SetDigest's maintenance, as a pull's (pull)
	f.n.SetDigest(key, digest)
	r := &fleetv1.CheckResult{Key: key.String(), CheckedAtMs: start.UnixMilli(), Ok: true, Served: true,
		Cloned: res.Cloned || !had, Fetched: res.Fetched, Changed: res.Changed, Digest: digest,
		DurationMs: f.clk.Now().Sub(start).Milliseconds()}
	if rootsErr == nil {
		r.Roots, r.RootsKnown = roots, true
	}
	f.n.Report(r)
	return true, nil
}

// tierDropped deletes the copies the full tier no longer places here
// (TierDrop), each only when its state no longer names this node, this
// node does not own it, and a peer serves the verified state.
func (f *Node) tierDropped(ctx context.Context, keys []string) {
	parsed := make([]repokey.Key, 0, len(keys))
	for _, s := range keys {
		k, err := repokey.Parse(s) // a key from the coordinator's drops, checked where it arrives
		if err != nil {
			f.log.Error("coordinator dropped an invalid key; skipped", "key", s, "err", err)
			continue
		}
		parsed = append(parsed, k)
	}
	f.dropCopies(ctx, parsed)
}

// dropRetry is how often the tier's drops kept for want of another
// replica serving the verified state are tried again: the new replicas
// are usually still pulling when the drop arrives.
const dropRetry = 30 * time.Second

// dropRetryLoop tries the kept drops again every dropRetry, until each is
// done or no longer due (its state names this node again, or it left the
// catalog).
func (f *Node) dropRetryLoop(ctx context.Context) {
	tick := f.clk.NewTicker(dropRetry)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		f.retryKeptDrops(ctx)
	}
}

// retryKeptDrops tries every kept drop once more.
func (f *Node) retryKeptDrops(ctx context.Context) {
	f.mu.Lock()
	keys := slices.Collect(maps.Keys(f.keptDrops))
	clear(f.keptDrops)
	f.mu.Unlock()
	if len(keys) > 0 {
		f.dropCopies(ctx, keys)
	}
}

// dropCopies is tierDropped's work on checked keys. A drop kept because
// no peer serves the verified state is remembered for dropRetryLoop.
func (f *Node) dropCopies(ctx context.Context, keys []repokey.Key) {
	self := f.n.ID()
	for _, k := range keys {
		f.mu.Lock()
		st := f.view.Get(k)
		f.mu.Unlock()
		switch {
		case st == nil:
			continue // removed: the catalog's removal deletes it
		case st.GetOwner() == self:
			f.log.Info("tier drop of a repository this node owns: kept", "key", k)
			continue
		case !elsewhere(st.GetReplicas(), self):
			f.log.Info("tier drop of a repository whose state names this node: kept", "key", k, "replicas", st.GetReplicas())
			continue
		case !f.mirror.Has(k):
			continue
		}
		peer, ok := f.peerServes(ctx, k, st)
		if !ok {
			f.log.Warn("tier drop: no other replica serves the verified state yet; the copy is kept and the drop tried again", "key", k,
				"replicas", st.GetReplicas(), "verified", st.GetDigest(), "retry", dropRetry)
			f.mu.Lock()
			if f.keptDrops == nil {
				f.keptDrops = make(map[repokey.Key]struct{})
			}
			f.keptDrops[k] = struct{}{}
			f.mu.Unlock()
			continue
		}
		if err := f.mirror.Remove(ctx, k); err != nil {
			f.log.Error("tier drop: remove the copy", "key", k, "err", err)
			continue
		}
		f.n.ForgetDigest(k)
		f.mu.Lock()
		f.plan.Removed(k)
		f.mu.Unlock()
		f.reclass(k)
		f.log.Info("repository dropped: the full tier placed it elsewhere, and a replica serves it", "key", k, "node", peer)
	}
}

// peerServes reports a replica of st, other than this node, whose refs are
// the verified state.
func (f *Node) peerServes(ctx context.Context, key repokey.Key, st *fleetv1.RepoState) (uint32, bool) {
	if st.GetDigest() == "" {
		return 0, false
	}
	for _, id := range f.peers(st) {
		refs, err := f.mirror.ListSource(ctx, key, mirror.Source{URL: f.peerURL(id, key), Env: f.proxyEnv()})
		if err == nil && refs.Digest() == st.GetDigest() && slices.Contains(st.GetReplicas(), id) {
			return id, true
		}
	}
	return 0, false
}
