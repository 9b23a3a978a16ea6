package coordinator

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// The full tier: the rules live in placement.Tier (a pure engine); this
// file feeds it the full nodes and the units (a fork network, or a
// standalone repository, weighted by its repositories: the coordinator
// knows no sizes yet), confirms what full nodes hold, and sends each
// repository's replicas with its state. Full nodes still pull every
// repository, so the tier's assigns and drops ask nothing of them yet:
// they change what the full nodes are told (RepoState.replicas).

// tierUnitPrefix starts the unit name of a fork network: a key is never
// one (keys are host/path), so a network and a key cannot share a unit.
const tierUnitPrefix = "network:"

// tierUnit is the unit key is placed with on the full tier.
func (c *Coordinator) tierUnit(key string) string {
	if name := c.nets.Of(key); name != "" {
		return tierUnitPrefix + name
	}
	return key
}

// tierKeys returns the repositories of unit.
func (c *Coordinator) tierKeys(unit string) []string {
	if name, ok := strings.CutPrefix(unit, tierUnitPrefix); ok {
		return c.nets.Members(name)
	}
	return []string{unit}
}

// tierUnits returns every unit with its weight: its repositories.
func (c *Coordinator) tierUnits() map[string]int {
	units := map[string]int{}
	c.engine.Each(func(k string, _, _ uint32, _ bool) { units[c.tierUnit(k)]++ })
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

// syncTier gives the tier the current members and, when the key set or
// the fork networks changed, the units; then sends the replicas that
// changed to the full nodes. Caller holds c.mu.
func (c *Coordinator) syncTier() {
	if c.tier == nil || !c.placing {
		return
	}
	if sig := (tierSignature{c.engine.Len(), c.engine.Digest(), c.netGen}); sig != c.tierSig {
		c.tierSig = sig
		units := c.tierUnits()
		for _, u := range c.tier.Units() {
			if units[u] == 0 {
				c.tier.SetUnit(u, 0)
			}
		}
		for u, w := range units {
			c.tier.SetUnit(u, w)
		}
	}
	if c.tierMembersDirty {
		c.tierMembersDirty = false
		c.tier.SetMembers(c.tierMembers())
	}
	for _, d := range c.tier.Decisions() {
		c.tierDirty = true
		if d.Kind == placement.Assign || d.Kind == placement.Drop {
			for _, k := range c.tierKeys(d.Key) {
				c.broadcastState(k)
			}
		}
	}
}

// tierSignature changes when the tier's units may have: the key set or
// the fork networks.
type tierSignature struct {
	keys   int
	digest uint64
	nets   uint64
}

// tierConfirm records that full node id holds key. Caller holds c.mu.
func (c *Coordinator) tierConfirm(id uint32, key string) {
	if c.tier != nil && c.tier.Confirm(id, c.tierUnit(key)) {
		c.tierDirty = true
	}
}

// replicas returns key's replicas on the full tier, in placement order.
// Caller holds c.mu.
func (c *Coordinator) replicas(key string) []uint32 {
	if c.tier == nil {
		return nil
	}
	want, _, _ := c.tier.ReplicasOf(c.tierUnit(key))
	return slices.Clip(want)
}

// metaTier is the meta key of the tier's snapshot.
const metaTier = "tier"

// restoreTier rebuilds the full tier from its stored snapshot, or starts
// an empty one; call it once the engine and the networks are restored. A
// snapshot that cannot be read is logged and replaced: the full nodes'
// inventories confirm again what they hold.
func (c *Coordinator) restoreTier(ctx context.Context) error {
	tcfg := placement.TierConfig{Replicas: c.cfg.FullReplicas}
	c.tier = placement.NewTier(tcfg)
	snap, ok, err := c.readMeta(ctx, metaTier, "the placement of the full tier")
	if err != nil || !ok {
		return err
	}
	units := c.tierUnits()
	t, err := placement.RestoreTier(tcfg, snap, units)
	if err != nil {
		c.log.Warn("restore: stored full tier unreadable; placing it again", "err", err)
		return nil
	}
	c.tier = t
	c.tierSig = tierSignature{c.engine.Len(), c.engine.Digest(), c.netGen}
	c.tierMembersDirty = true // the same members, unless some left meanwhile
	for _, m := range t.Members() {
		c.tierWeight[m.ID] = m.Weight
	}
	return nil
}
