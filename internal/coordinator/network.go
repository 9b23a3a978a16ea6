package coordinator

import (
	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/network"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Fork networks: package network says which repositories are together
// (from the catalog's network attribute and the roots that full nodes
// report, and the forks' parents that the forges' feeds name), package
// placement places each network whole; this file feeds the one into the
// other. Roots are trusted only from a full node's pull
// (served): full nodes are the operator's and verify against upstreams,
// while a volunteer could forge roots to join unrelated repositories.

// declareNetworks gives the network package the declared network of keys,
// from their effective entries (removed keys are forgotten), and applies
// what changes. Caller holds c.mu.
func (c *Coordinator) declareNetworks(keys []repokey.Key) {
	var changes []network.Change
	for _, k := range keys {
		e, ok := c.entry(k)
		if !ok {
			c.parentForgotten(k)
			changes = append(changes, c.nets.Remove(k)...)
			continue
		}
		ch, err := c.nets.Declare(k, e.Attrs[catalog.AttrNetwork])
		if err != nil {
			// The catalog skips such attributes and the API refuses them.
			c.log.Warn("network: declared name ignored", "key", k, "err", err)
			ch, _ = c.nets.Declare(k, "")
		}
		changes = append(changes, ch...)
	}
	c.applyNetworks(changes)
}

// forgetNetworks forgets removed keys, and the fork relations that name
// them. Caller holds c.mu.
func (c *Coordinator) forgetNetworks(keys []repokey.Key) {
	var changes []network.Change
	for _, k := range keys {
		c.parentForgotten(k)
		changes = append(changes, c.nets.Remove(k)...)
	}
	c.applyNetworks(changes)
}

// parentForgotten marks the stored state of key's forks dirty: removing
// key forgets their parent. Caller holds c.mu.
func (c *Coordinator) parentForgotten(key repokey.Key) {
	for _, f := range c.nets.Children(key) {
		if _, ok := c.status[f]; ok {
			c.dirty[f] = true
		}
	}
}

// feedParents records the forks' parents that a forge's feed named
// (checked keys of its host: forge.Parents): a fork of a repository of the
// fleet joins its parent's network before its first clone, as a shared
// root would, unless either declares a network (a declaration is the
// operator's word; the relation is then withdrawn). A parent that is not
// in the fleet, or that makes a cycle, is ignored. A forge is trusted for
// this as it is for the repository's URL. Caller holds c.mu.
func (c *Coordinator) feedParents(parents map[string]string) {
	var changes []network.Change
	for ks, ps := range parents {
		// The forge names keys of its host it was asked about: those the
		// engine places are Keys, the others are ignored.
		k, ok := c.engine.Key(ks)
		p, pok := c.engine.Key(ps)
		if !ok || !pok {
			continue
		}
		if c.nets.Declared(k) != "" || c.nets.Declared(p) != "" {
			p = ""
		}
		if c.nets.Parent(k) == p {
			continue
		}
		c.statusOf(k) // the parent is stored with the status
		c.dirty[k] = true
		changes = append(changes, c.nets.SetParent(k, p)...)
	}
	c.applyNetworks(changes)
}

// networkRoots records the roots a full node's pull of key found. Caller
// holds c.mu.
func (c *Coordinator) networkRoots(id uint32, key repokey.Key, roots []string) {
	if rec := c.nodes[id]; rec == nil || !rec.full() {
		return
	}
	c.statusOf(key) // the roots are stored with the status
	c.dirty[key] = true
	c.applyNetworks(c.nets.SetRoots(key, roots))
}

// applyNetworks places the keys whose network changed with their new
// network, tells their owners and targets the new pool, and the full nodes
// their state. Caller holds c.mu; the caller decides.
func (c *Coordinator) applyNetworks(changes []network.Change) {
	if len(changes) == 0 {
		return
	}
	set := make(map[repokey.Key]string, len(changes))
	for _, ch := range changes {
		set[ch.Key] = ch.To
		c.tierTouchNetwork(ch.Key, ch.From, ch.To)
		if ch.From != "" || ch.To != "" {
			c.log.Info("network changed", "key", ch.Key, "from", ch.From, "to", ch.To)
		}
	}
	c.engine.SetNetworks(set)
	c.placeDirty = true
	for _, ch := range changes {
		if !c.engine.Has(ch.Key) {
			continue
		}
		if _, ok := c.status[ch.Key]; ok {
			c.dirty[ch.Key] = true // the stored network name
		}
		owner, target := c.owner(ch.Key)
		for _, id := range []uint32{owner, target} {
			if s := c.sessions[id]; s != nil && id != 0 {
				s.queueAssign(ch.Key, false) // carries the new pool
			}
		}
		c.broadcastState(ch.Key)
	}
}

// resplit tells the owners (and targets) of the members of every network
// whose number of parts changed their new pool (an Assign carries it: the
// node moves the member from its old pool to the new one at its next
// check), and the full nodes their new number of parts. A member whose
// owner changed too is told by its move's Assign. Caller holds c.mu.
func (c *Coordinator) resplit() {
	for _, name := range c.engine.Resplit() {
		for _, k := range c.nets.Members(name) {
			if !c.engine.Has(k) {
				continue
			}
			owner, target := c.owner(k)
			for _, id := range []uint32{owner, target} {
				if s := c.sessions[id]; s != nil && id != 0 {
					s.queueAssign(k, false) // carries the new pool
				}
			}
			c.broadcastState(k)
		}
	}
}

// declaredNetworks lists every key's declared network, from the catalog
// and the API's overlay. Caller holds c.mu (or is restoring).
func (c *Coordinator) declaredNetworks() map[repokey.Key]string {
	out := map[repokey.Key]string{}
	if c.cat != nil {
		c.cat.Attr(catalog.AttrNetwork, func(k repokey.Key, v string) bool {
			if _, ok := c.overlay[k]; !ok {
				out[k] = v
			}
			return true
		})
	}
	for k, ov := range c.overlay {
		if v := ov.Attrs[catalog.AttrNetwork]; !ov.Removed && v != "" {
			out[k] = v
		}
	}
	return out
}

// networkMap is the network of every key in one, for the engine.
func networkMap(n *network.Networks) map[repokey.Key]string {
	out := map[repokey.Key]string{}
	n.Each(func(e network.Entry) {
		if e.Network != "" {
			out[e.Key] = e.Network
		}
	})
	return out
}
