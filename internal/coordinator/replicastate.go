package coordinator

import (
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Replicas that differ: each full node reports the refs digest of what it
// holds, with each pull (CheckResult.digest, served) and in its inventory
// (HeldRepo.digest), which it sent already; the coordinator keeps, apart
// from the statuses, only the replicas whose last report is not the
// recorded digest (or that have not reported since the recorded digest
// changed). While every replica holds the recorded state a repository
// costs nothing here, and its RepoState carries no replica_states: a
// differing replica costs its entry (about 40 bytes with its share of the
// map) until it reports the recorded digest again.

// replicaDiff is one replica whose state is not the recorded one.
type replicaDiff struct {
	node      uint32
	hasDigest bool // it reported a digest (digest; false: none, or no refs)
	digest    [16]byte
	since     int64 // unix ms: since when it differs
}

// replicaReport records that full node id holds key with refs digest d
// (a pull's result, its inventory), when it is one of key's replicas.
// Caller holds c.mu.
func (c *Coordinator) replicaReport(id uint32, key repokey.Key, d string, now time.Time) {
	if c.tier == nil || c.tier.Everyone() {
		return
	}
	diffs := c.replicaDiffs[key]
	i := slices.IndexFunc(diffs, func(x replicaDiff) bool { return x.node == id })
	recorded := ""
	if r := c.status[key]; r != nil {
		recorded = r.Digest()
	}
	if want, _, ok := c.tier.ReplicasOf(c.tierUnit(key)); !ok || !slices.Contains(want, id) {
		d = recorded // a holder that is not a replica: not kept
	}
	if d == recorded {
		if i >= 0 {
			c.setReplicaDiffs(key, slices.Delete(diffs, i, i+1))
			c.broadcastState(key)
		}
		return
	}
	b, ok := gitcmd.ParseDigest(d)
	x := replicaDiff{node: id, hasDigest: ok, digest: b, since: now.UnixMilli()}
	if i >= 0 {
		if diffs[i].hasDigest == x.hasDigest && diffs[i].digest == x.digest {
			return
		}
		x.since = diffs[i].since // it has differed since then
		diffs[i] = x
	} else {
		diffs = append(diffs, x)
	}
	c.setReplicaDiffs(key, diffs)
	c.broadcastState(key)
}

// replicaDigestChanged records that key's recorded digest changed from
// old at now: each replica that held old differs from now on, until it
// reports the new one (its pull). A holder that is no longer a replica is
// left out: it is not kept up to date. Caller holds c.mu.
func (c *Coordinator) replicaDigestChanged(key repokey.Key, old string, now time.Time) {
	if c.tier == nil || c.tier.Everyone() {
		return
	}
	want, held, ok := c.tier.ReplicasOf(c.tierUnit(key))
	if !ok {
		return
	}
	diffs := c.replicaDiffs[key]
	b, hasOld := gitcmd.ParseDigest(old)
	for _, id := range held {
		if slices.Contains(want, id) && !slices.ContainsFunc(diffs, func(x replicaDiff) bool { return x.node == id }) {
			diffs = append(diffs, replicaDiff{node: id, hasDigest: hasOld, digest: b, since: now.UnixMilli()})
		}
	}
	// A replica that already reported the new digest holds it now.
	nb, hasNew := gitcmd.ParseDigest(c.status[key].Digest())
	diffs = slices.DeleteFunc(diffs, func(x replicaDiff) bool { return x.hasDigest == hasNew && x.digest == nb })
	c.setReplicaDiffs(key, diffs)
}

// setReplicaDiffs stores key's differing replicas (none: forgets key).
// Caller holds c.mu.
func (c *Coordinator) setReplicaDiffs(key repokey.Key, diffs []replicaDiff) {
	if len(diffs) == 0 {
		delete(c.replicaDiffs, key)
		return
	}
	if k, ok := c.engine.Key(key.String()); ok {
		key = k // the engine's copy: the map shares the catalog's keys
	}
	c.replicaDiffs[key] = slices.Clip(diffs)
}

// replicaStates is what RepoState.replica_states says of key: its
// replicas that are not confirmed, or differ from the recorded digest, in
// placement order; nil while every replica holds the recorded state.
// Caller holds c.mu.
func (c *Coordinator) replicaStates(key repokey.Key) []*fleetv1.ReplicaState {
	if c.tier == nil || c.tier.Everyone() {
		return nil
	}
	want, held, ok := c.tier.ReplicasOf(c.tierUnit(key))
	if !ok {
		return nil
	}
	diffs := c.replicaDiffs[key]
	var out []*fleetv1.ReplicaState
	for _, id := range want {
		confirmed := slices.Contains(held, id)
		i := slices.IndexFunc(diffs, func(x replicaDiff) bool { return x.node == id })
		if confirmed && i < 0 {
			continue
		}
		st := &fleetv1.ReplicaState{Node: id, Confirmed: confirmed}
		if i >= 0 {
			st.DiffersSinceMs = diffs[i].since
			if diffs[i].hasDigest {
				st.Digest = (&repoStatus{hasDigest: true, digest: diffs[i].digest}).Digest()
			}
		}
		out = append(out, st)
	}
	return out
}

// ReplicaBehind is a replica whose refs differ from the recorded state
// for longer than a pull takes (repostate.ReplicaBehindAfter).
type ReplicaBehind struct {
	Key   string
	Node  uint32
	Since time.Time
}

// ReplicasBehind lists the replicas behind at now, in no order: what a
// repair from a peer that holds the recorded state reads. Its cost is in
// the replicas that differ, not in the repositories.
func (c *Coordinator) ReplicasBehind(now time.Time) []ReplicaBehind {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicasBehind(now)
}

// replicasBehind is ReplicasBehind. Caller holds c.mu.
func (c *Coordinator) replicasBehind(now time.Time) []ReplicaBehind {
	if c.tier == nil || c.tier.Everyone() {
		return nil
	}
	var out []ReplicaBehind
	cutoff := now.Add(-repostate.ReplicaBehindAfter).UnixMilli()
	for key, diffs := range c.replicaDiffs {
		want, held, ok := c.tier.ReplicasOf(c.tierUnit(key))
		for _, x := range diffs {
			if ok && x.since <= cutoff && slices.Contains(want, x.node) && slices.Contains(held, x.node) {
				out = append(out, ReplicaBehind{Key: key.String(), Node: x.node, Since: time.UnixMilli(x.since)})
			}
		}
	}
	return out
}
