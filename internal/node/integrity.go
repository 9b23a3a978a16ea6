package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// The integrity scan of the mirrors on disk (every role): each mirror is
// read whole in the background (mirror.Store.Verify: its objects present
// and readable, every packed object's CRC-32 right) about once per
// --verify-interval, and at once when a clone or maintenance failed on its
// objects (a pack cache's answer that failed its check among them), or
// when it was written shortly before an unclean stop. A mirror that fails is not served (the full node
// answers 404 for it, a partial node refuses it to the full nodes' pulls)
// until it is repaired: copied again from its upstream into tmp and
// swapped in.

// A broken mirror goes through repostate.Corrupt and Repairing, or is
// Unchecked after an unclean stop (checkAfterCrash): the API shows these.

// bucketIntegrity keeps when each mirror's integrity was last checked
// (unix ms, decimal).
const bucketIntegrity = "verified"

// integrityScan is the state of a node's integrity scan.
type integrityScan struct {
	mu     sync.Mutex
	plan   *integrityPlan
	broken map[repokey.Key]repostate.State // key -> Corrupt, Repairing or Unchecked
	// changed hears of each change of broken, without mu held (the
	// role's Changed); set before the node runs.
	changed func(key repokey.Key)
	wake    chan struct{}
}

func newIntegrityScan(interval time.Duration) *integrityScan {
	return &integrityScan{plan: newIntegrityPlan(interval, 0.1), broken: map[repokey.Key]repostate.State{}, wake: make(chan struct{}, 1)}
}

// brokenState is key's state while it is not served; false when it is
// whole.
func (v *integrityScan) brokenState(key repokey.Key) (repostate.State, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.broken[key]
	return s, ok
}

// setBroken stops serving key's mirror, in state.
func (v *integrityScan) setBroken(key repokey.Key, state repostate.State) { v.set(key, state, true) }

// setWhole serves key's mirror again.
func (v *integrityScan) setWhole(key repokey.Key) { v.set(key, 0, false) }

func (v *integrityScan) set(key repokey.Key, state repostate.State, broken bool) {
	v.mu.Lock()
	if broken {
		v.broken[key] = state
	} else {
		delete(v.broken, key)
	}
	v.mu.Unlock()
	if v.changed != nil {
		v.changed(key)
	}
}

// checkIntegritySoon asks for a check of key's integrity at once: why (a
// clone of it from this node, or its maintenance) failed on its objects.
func (n *Node) checkIntegritySoon(key repokey.Key, why string) {
	v := n.integrity
	held := n.mirror.Has(key)
	v.mu.Lock()
	if _, known := v.plan.items[key]; !known && held {
		v.plan.add(key, time.Time{}, n.clk.Now()) // cloned since the plan last looked
	}
	ok := v.plan.urgent(key, n.clk.Now())
	v.mu.Unlock()
	if ok {
		n.log.Warn(why+" failed on the mirror's objects: verifying it now", "key", key)
		select {
		case v.wake <- struct{}{}:
		default:
		}
	}
}

// syncIntegrityKeys gives the plan the mirrors the node holds now.
func (n *Node) syncIntegrityKeys(ctx context.Context, stored map[string]time.Time) {
	n.mu.Lock()
	held := make(map[repokey.Key]bool, len(n.digests))
	for k := range n.digests {
		held[k] = true
	}
	n.mu.Unlock()
	now := n.clk.Now()
	v := n.integrity
	v.mu.Lock()
	defer v.mu.Unlock()
	for k := range held {
		v.plan.add(k, stored[k.String()], now)
	}
	for k := range v.plan.items {
		if _, broken := v.broken[k]; !held[k] && !broken {
			v.plan.remove(k)
		}
	}
}

// integrityLoop checks the mirrors' integrity as the plan makes them due,
// one at a time.
func (n *Node) integrityLoop(ctx context.Context) {
	stored := map[string]time.Time{}
	err := n.db.Scan(ctx, bucketIntegrity, "", func(k string, v []byte) error {
		if ms, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			stored[k] = time.UnixMilli(ms)
		}
		return nil
	})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		// Not fatal: a mirror whose last check is not known is planned as
		// never checked, at a point spread over the interval.
		n.log.Warn("integrity scan: could not read when the mirrors were last checked; those not read are checked within --verify-interval as if never checked",
			"bucket", bucketIntegrity, "read", len(stored), "err", err)
	}
	n.syncIntegrityKeys(ctx, stored)
	refreshed := n.clk.Now()
	v := n.integrity
	for ctx.Err() == nil {
		if !n.waitActive(ctx) { // background work: in the volunteer's hours
			return
		}
		if n.clk.Now().Sub(refreshed) > min(time.Minute, n.cfg.IntegrityInterval) {
			n.syncIntegrityKeys(ctx, nil)
			refreshed = n.clk.Now()
		}
		v.mu.Lock()
		key, ok, wait := v.plan.next(n.clk.Now())
		v.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-v.wake:
			case <-n.clk.After(min(wait, time.Minute)):
			}
			continue
		}
		start := n.clk.Now()
		err := n.mirror.Verify(ctx, key)
		end := n.clk.Now()
		if ctx.Err() != nil {
			return
		}
		v.mu.Lock()
		v.plan.done(key, end, end.Sub(start))
		v.mu.Unlock()
		if err := n.db.Put(ctx, bucketIntegrity, key.String(), []byte(strconv.FormatInt(end.UnixMilli(), 10))); err != nil {
			n.log.Warn("store verification time", "key", key, "err", err)
		}
		switch {
		case errors.Is(err, mirror.ErrCorrupt):
			n.repair(ctx, key, err)
		case err != nil && n.mirror.Has(key):
			n.log.Warn("could not verify the mirror", "key", key, "err", err)
		case err == nil:
			n.log.Debug("mirror verified", "key", key, "ms", end.Sub(start).Milliseconds())
			n.maint.note(key) // so that every mirror is looked at once per interval
		}
	}
}

// holdUnchecked stops serving the mirrors written shortly before an
// unclean stop until checkAfterCrash has checked them, and returns them.
func (n *Node) holdUnchecked() []repokey.Key {
	keys := n.mirror.Unchecked()
	for _, k := range keys {
		n.integrity.setBroken(k, repostate.Unchecked)
	}
	return keys
}

// checkAfterCrash checks, one at a time, the mirrors written shortly
// before an unclean stop (mirror.Store.Unchecked), which are not served
// meanwhile: a whole one is served again, a corrupt one is repaired. One
// that cannot be verified (git failed) is tried again a minute later.
func (n *Node) checkAfterCrash(ctx context.Context, keys []repokey.Key) {
	n.log.Warn("the last stop was not clean: checking the mirrors written shortly before it", "mirrors", len(keys))
	for len(keys) > 0 {
		var again []repokey.Key
		for _, key := range keys {
			err := n.mirror.Verify(ctx, key)
			if ctx.Err() != nil {
				return
			}
			switch {
			case err == nil:
				n.integrity.setWhole(key)
				n.log.Info("mirror checked after an unclean stop: served", "key", key)
			case errors.Is(err, mirror.ErrCorrupt):
				n.repair(ctx, key, err) // served once repaired
			case !n.mirror.Has(key):
				n.integrity.setWhole(key) // removed meanwhile
			default:
				n.log.Warn("could not check a mirror after an unclean stop; will retry", "key", key, "err", err)
				again = append(again, key)
			}
		}
		keys = again
		if len(keys) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-n.clk.After(time.Minute):
		}
	}
}

// repair stops serving key's broken mirror, copies it again from its
// upstream (its URL checked against the egress policy first, as at every
// fetch) and swaps the copy in. A failed repair leaves the mirror
// unserved and is tried again by the next integrity check, a minute later.
func (n *Node) repair(ctx context.Context, k repokey.Key, cause error) {
	key := k.String()
	v := n.integrity
	v.setBroken(k, repostate.Corrupt)
	n.log.Error("mirror is corrupt: no longer served; repairing it from its upstream", "key", key, "err", cause)
	url := n.upstreamOf(k)
	if url == "" {
		n.log.Warn("corrupt mirror of a repository this node does not know: deleting it", "key", key)
		if err := n.mirror.Remove(ctx, k); err != nil {
			n.log.Error("remove corrupt mirror", "key", key, "err", err)
		}
		n.ForgetDigest(k)
		v.setWhole(k)
		return
	}
	v.setBroken(k, repostate.Repairing)
	start := n.clk.Now()
	refs, err := n.replaceUpstream(ctx, k, url)
	n.flog.Append(n.WorkEntry(key, "repair", start, mirror.Result{Before: refs, After: refs}, err)) // the refs are the upstream's again
	if err != nil {
		v.setBroken(k, repostate.Corrupt)
		v.mu.Lock()
		v.plan.retry(k, n.clk.Now(), time.Minute)
		v.mu.Unlock()
		n.log.Error("repair of a corrupt mirror failed; will retry", "key", key, "class", gitcmd.ClassOf(err), "err", err)
		return
	}
	digest := refs.Digest()
	n.SetDigest(k, digest)
	v.setWhole(k)
	n.log.Info("corrupt mirror repaired from its upstream: served again", "key", key, "digest", digest,
		"ms", n.clk.Now().Sub(start).Milliseconds())
	if n.owns(key) {
		n.Report(&fleetv1.CheckResult{Key: key, CheckedAtMs: start.UnixMilli(), Ok: true, Cloned: true, Fetched: true,
			Changed: true, Digest: digest, DurationMs: n.clk.Now().Sub(start).Milliseconds()})
	}
	n.role.Repaired(k, digest)
	// A broken pool was made anew for this repair: its other members miss
	// what it held. Each is unserved and repaired from its own upstream,
	// with what the pool holds again as haves (mirror.Suspects).
	for _, other := range n.mirror.Suspects() {
		if other != k && ctx.Err() == nil {
			n.repair(ctx, other, fmt.Errorf("mirror %s: its network's object pool was broken and made anew: %w", other, mirror.ErrCorrupt))
		}
	}
}

// owns tells whether this node fetches key itself.
func (n *Node) owns(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.owned[key] != nil
}

// upstreamOf is key's upstream URL as this node knows it ("" if unknown).
func (n *Node) upstreamOf(key repokey.Key) string {
	n.mu.Lock()
	o := n.owned[key.String()]
	n.mu.Unlock()
	if o != nil {
		return o.url
	}
	return n.role.Upstream(key) // a full node knows every repository's
}
