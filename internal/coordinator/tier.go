package coordinator

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// The full tier: the rules live in placement.Tier (a pure engine); this
// file feeds it the full nodes and the units (a fork network, or a
// standalone repository, weighted by its bytes: tiersize.go) as the
// catalog, the networks and the repositories' sizes change them,
// confirms what full nodes hold, and sends each repository's replicas with
// its state (RepoState.replicas, and replica_states: replicastate.go). A
// full node pulls only the repositories whose replicas name it (or have
// none), copying a repository it lacks from a replica that serves it; a
// copy it held before it stopped being a replica stays until the tier
// drops it there (TierDrop), once the unit has as many confirmed replicas
// without it as it should have.

// tierUnitPrefix starts the unit name of a fork network: a key is never
// one (keys are host/path), so a network and a key cannot share a unit.
const tierUnitPrefix = "network:"

// tierUnit is the unit key is placed with on the full tier.
func (c *Coordinator) tierUnit(key repokey.Key) string {
	if name := c.nets.Of(key); name != "" {
		return tierUnitPrefix + name
	}
	return key.String()
}

// tierKeys returns the repositories of unit.
func (c *Coordinator) tierKeys(unit string) []repokey.Key {
	if name, ok := strings.CutPrefix(unit, tierUnitPrefix); ok {
		return c.nets.Members(name)
	}
	if k, ok := c.engine.Key(unit); ok {
		return []repokey.Key{k}
	}
	// A unit the engine no longer places (its key removed) is still the
	// name tierUnit gave a Key, or the tier's snapshot stored.
	return []repokey.Key{storedKey(unit)}
}

// tierUnits returns every unit with its weight: its bytes in KiB
// (tierUnitBytes). Caller holds c.mu.
func (c *Coordinator) tierUnits() map[string]int {
	units := map[string]int{}
	c.engine.Each(func(k repokey.Key, _, _ uint32, _ bool) {
		units[c.tierUnit(k)] += int(max(sizeBytes(c.engine.Size(k)), sizeFloor) / 1024)
	})
	return units
}

// diskWeight is a full node's weight on the tier: its disk (--disk-quota,
// or its file system's size) in terabytes, to a hundredth, so that the
// small changes of a file system's size move nothing.
func diskWeight(total uint64) float64 {
	return max(math.Round(float64(total)/1e10)/100, 0.01)
}

// tierDisk records the disk a node reported (its heartbeat). Caller holds
// c.mu.
func (c *Coordinator) tierDisk(id uint32, total uint64) {
	if rec := c.nodes[id]; total > 0 && rec != nil && rec.full() && c.tierWeight[id] != diskWeight(total) {
		c.tierWeight[id] = diskWeight(total)
		c.tierMembersDirty = true
	}
}

// tierMembers returns the tier's members: the full nodes alive or within
// their grace, weighted by their disks. A node whose disk is not known yet
// (no heartbeat since the coordinator started, and none in the stored
// tier) waits for its first heartbeat. Caller holds c.mu.
func (c *Coordinator) tierMembers() []ring.Member {
	var ms []ring.Member
	for _, n := range c.table.Nodes() {
		rec := c.nodes[n.ID]
		if rec == nil || !rec.full() || (n.State != membership.Alive && n.State != membership.Suspect) {
			continue
		}
		if w := c.tierWeight[n.ID]; w > 0 {
			ms = append(ms, ring.Member{ID: n.ID, Weight: w})
		}
	}
	return ms
}

// syncTier gives the tier the current members and the units that
// changed, then sends the replicas that changed to the full nodes. With no
// more full nodes than replicas the tier is given no units at all: every
// full node holds everything, and replicas answers with the full nodes.
// Past that, the first sync gives it every unit, and the ones after only
// those touched since (tierTouch): a catalog diff costs the tier in
// proportion to the keys it changes. Caller holds c.mu.
func (c *Coordinator) syncTier() {
	if c.tier == nil || !c.placing {
		return
	}
	if c.tierMembersDirty || len(c.tierTouched) > 0 || !c.tierFed {
		c.tierShares = nil
	}
	if c.tierMembersDirty {
		c.tierMembersDirty = false
		ms := c.tierMembers()
		if len(ms) > c.tier.Replicas() && !c.tierFed {
			// Given while every full node still holds everything, the
			// units are taken to be held by the members that stay.
			c.tierFeed()
		}
		before := c.tier.Members()
		c.tier.SetMembers(ms)
		if c.tier.Everyone() && c.tier.Len() > 0 {
			c.tier = placement.NewTier(c.tierConfig())
			c.tier.SetMembers(ms)
			c.tierFed, c.tierDirty = false, true
			clear(c.tierTouched)
		}
		if c.tier.Everyone() && !slices.Equal(before, c.tier.Members()) {
			// Every repository's replicas are the full nodes: each
			// changed, and the tier decides nothing to say so.
			c.tierDirty = true
			for _, s := range c.fullSessions() {
				s.queueSweep(c.engineKeys)
			}
		}
	}
	if !c.tierFed && !c.tier.Everyone() {
		c.tierFeed()
	}
	if c.tierFed {
		for u := range c.tierTouched {
			c.tier.SetUnit(u, c.tierUnitWeight(u))
		}
		clear(c.tierTouched)

	}
	for _, d := range c.tier.Decisions() {
		c.tierDirty, c.tierShares = true, nil
		if d.Kind != placement.Assign && d.Kind != placement.Drop {
			continue
		}
		s := c.sessions[d.Node]
		for _, k := range c.tierKeys(d.Unit) {
			c.broadcastState(k)
			switch {
			case s != nil && s.full:
				s.queueTierDrop(k, d.Kind == placement.Drop)
			case s == nil:
				c.tierDropAway(d.Node, k, d.Kind == placement.Drop)
			}
		}
	}
}

// tierDropAway keeps a drop of key decided for full node id while it has
// no session (keep false takes one back: the tier placed key on it
// again), for its next session: the tier counts the copy as gone from
// the moment it decided the drop, and would not decide it again unless
// the node confirmed the copy anew. Caller holds c.mu.
func (c *Coordinator) tierDropAway(id uint32, key repokey.Key, drop bool) {
	if !drop {
		delete(c.tierDropsAway[id], key)
		return
	}
	if rec := c.nodes[id]; rec == nil || !rec.full() {
		return
	}
	if c.tierDropsAway[id] == nil {
		c.tierDropsAway[id] = map[repokey.Key]bool{}
	}
	c.tierDropsAway[id][key] = true
}

// tierDropsBack queues on s, a full node's new session, the drops decided
// while it had none. Caller holds c.mu.
func (c *Coordinator) tierDropsBack(s *session) {
	if !s.full {
		return
	}
	for k := range c.tierDropsAway[s.id] {
		if c.engine.Has(k) {
			s.queueTierDrop(k, true)
		}
	}
	delete(c.tierDropsAway, s.id)
}

// engineKeys yields every key of the engine. Caller holds c.mu.
func (c *Coordinator) engineKeys(yield func(repokey.Key) bool) {
	more := true
	c.engine.Each(func(k repokey.Key, _, _ uint32, _ bool) {
		more = more && yield(k)
	})
}

// tierFeed gives the tier every unit, and removes those it has that are no
// longer units. Caller holds c.mu.
func (c *Coordinator) tierFeed() {
	units := c.tierUnits()
	for _, u := range c.tier.Units() {
		if units[u] == 0 {
			c.tier.SetUnit(u, 0)
		}
	}
	for u, w := range units {
		c.tier.SetUnit(u, w)
	}
	c.tierFed = true
	clear(c.tierTouched)
}

// tierTouch records that the units of keys may have changed: keys added
// or removed. Caller holds c.mu.
func (c *Coordinator) tierTouch(keys ...repokey.Key) {
	if !c.tierFed {
		return
	}
	for _, k := range keys {
		c.tierTouched[c.tierUnit(k)] = struct{}{}
	}
}

// tierTouchNetwork records that key moved from fork network from to to
// ("" for none). Caller holds c.mu.
func (c *Coordinator) tierTouchNetwork(key repokey.Key, from, to string) {
	if !c.tierFed {
		return
	}
	for _, n := range []string{from, to} {
		u := key.String()
		if n != "" {
			u = tierUnitPrefix + n
		}
		c.tierTouched[u] = struct{}{}
	}
}

// tierConfirm records that full node id holds key. Caller holds c.mu.
func (c *Coordinator) tierConfirm(id uint32, key repokey.Key) {
	if unit := c.tierUnit(key); c.tier != nil && c.tier.Confirm(id, unit) {
		c.tierDirty, c.tierShares = true, nil
		for _, k := range c.tierKeys(unit) {
			c.broadcastState(k) // its replica_states
		}
	}
}

// replicas returns key's replicas on the full tier, in placement order.
// Caller holds c.mu.
func (c *Coordinator) replicas(key repokey.Key) []uint32 {
	if c.tier == nil {
		return nil
	}
	return slices.Clip(c.tier.Where(c.tierUnit(key)))
}

// tierShares is what the API shows of the tier: each member's share
// (placement.TierLoad: units, and their weight in KiB), and the units
// confirmed on fewer full nodes than they should be.
// everyone: every full node is to hold everything (the tier places
// nothing, and confirms nothing).
type tierShares struct {
	loads    map[uint32]placement.TierLoad
	everyone bool
	// short: the repositories with fewer replicas confirmed on full nodes
	// alive than they should have, when the full nodes down were down
	// (-1: not worked out yet). underHealthy keeps them.
	short int
	down  []uint32
}

// tierLoads reads the tier's shares. Working them out walks every unit
// (56 ms at a million: BenchmarkTierLoads), under c.mu, so they are kept
// until the tier changes (a sync that changed something, a confirmed
// replica), not worked out again at each call of the API. Caller holds
// c.mu.
func (c *Coordinator) tierLoads() tierShares {
	if c.tier == nil || c.tier.Everyone() || !c.tierFed {
		return tierShares{everyone: true}
	}
	if c.tierShares == nil {
		loads := c.tier.LoadsCounting(c.unitRepos)
		c.tierShares = &tierShares{loads: loads, short: -1}
	}
	return *c.tierShares
}

// unitRepos is how many repositories unit holds. Caller holds c.mu.
func (c *Coordinator) unitRepos(unit string) int {
	if name, ok := strings.CutPrefix(unit, tierUnitPrefix); ok {
		return c.nets.Size(name)
	}
	return 1
}

// underHealthy counts the repositories with fewer healthy replicas than
// --full-replicas: replicas confirmed on a full node that is alive now
// (not suspect within its grace, not gone) and whose refs are not behind
// (replicasBehind). A confirmed copy on a full node that stopped
// answering, or one left behind, does not serve the verified state: one
// more loss may lose it. The walk over every unit is kept with the
// tier's figures, and done again when the tier or the full nodes down
// change; the replicas behind are few, and counted at each call. Caller
// holds c.mu.
func (c *Coordinator) underHealthy(now time.Time) int {
	if c.tierLoads().everyone {
		return 0
	}
	var down []uint32
	for _, n := range c.table.Nodes() {
		if rec := c.nodes[n.ID]; rec != nil && rec.full() && n.State != membership.Alive {
			down = append(down, n.ID)
		}
	}
	slices.Sort(down)
	up := func(id uint32) bool { return !slices.Contains(down, id) }
	sh := c.tierShares
	if sh.short < 0 || !slices.Equal(sh.down, down) {
		sh.short, sh.down = c.tier.Short(up, c.unitRepos).Repos, down
	}
	n := sh.short
	need := min(c.tier.Replicas(), len(c.tier.Members()))
	behind := map[repokey.Key][]uint32{}
	for _, b := range c.replicasBehind(now) {
		if k, ok := c.engine.Key(b.Key); ok {
			behind[k] = append(behind[k], b.Node)
		}
	}
	for key, nodes := range behind {
		_, held, _ := c.tier.ReplicasOf(c.tierUnit(key))
		alive := slices.DeleteFunc(slices.Clone(held), func(id uint32) bool { return !up(id) })
		if len(alive) < need {
			continue // counted with its unit
		}
		current := slices.DeleteFunc(alive, func(id uint32) bool { return slices.Contains(nodes, id) })
		if len(current) < need {
			n++
		}
	}
	return n
}

// metaTier is the meta key of the tier's snapshot.
const metaTier = "tier"

// restoreTier rebuilds the full tier from its stored snapshot, or starts
// an empty one; call it once the engine and the networks are restored. A
// snapshot that cannot be read is logged and replaced: the full nodes'
// inventories confirm again what they hold.
func (c *Coordinator) restoreTier(ctx context.Context) error {
	c.tier = placement.NewTier(c.tierConfig())
	snap, ok, err := c.readMeta(ctx, metaTier, "the placement of the full tier")
	if err != nil || !ok {
		return err
	}
	t, err := placement.RestoreTier(c.tierConfig(), snap, nil)
	if err != nil {
		c.log.Warn("restore: stored full tier unreadable; placing it again", "err", err)
		return nil
	}
	if !t.Everyone() {
		// Its units, unless every full node holds everything.
		if t, err = placement.RestoreTier(c.tierConfig(), snap, c.tierUnits()); err != nil {
			return err // read once already
		}
		c.tierFed = true
	}
	c.tier = t
	c.tierMembersDirty = true // the same members, unless some left meanwhile
	for _, m := range t.Members() {
		c.tierWeight[m.ID] = m.Weight
	}
	return nil
}

func (c *Coordinator) tierConfig() placement.TierConfig {
	return placement.TierConfig{Replicas: c.cfg.FullReplicas}
}
