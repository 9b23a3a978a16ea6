package coordinator

import (
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// rebuildRing makes the ring from the current placement members and tells
// whether the member set changed. Caller holds c.mu (or is restoring).
func (c *Coordinator) rebuildRing() bool {
	ms := c.table.Members()
	members := make([]ring.Member, 0, len(ms))
	for _, m := range ms {
		members = append(members, ring.Member{ID: m.ID, Weight: m.Weight})
	}
	if c.ring != nil && slices.Equal(c.ring.Members(), sortedMembers(members)) {
		return false
	}
	c.ring = ring.New(members, ring.Options{})
	return true
}

func sortedMembers(ms []ring.Member) []ring.Member {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b ring.Member) int { return int(a.ID) - int(b.ID) })
	return out
}

// isMember reports whether id currently takes part in placement (alive or
// within grace). Caller holds c.mu.
func (c *Coordinator) isMember(id uint32) bool {
	if id == 0 {
		return false
	}
	for _, m := range c.ring.Members() {
		if m.ID == id {
			return true
		}
	}
	return false
}

// place moves key towards its ring owner, make-before-break: the new owner
// is told first (Target) and becomes Owner only when it confirms a mirror;
// the old owner keeps fetching until then. Caller holds c.mu.
func (c *Coordinator) place(key string) {
	if !c.placing {
		return
	}
	r := c.repos[key]
	if r == nil {
		return
	}
	want, ok := c.ring.Lookup(key)
	if !ok {
		return // no members at all: keep whatever there is
	}
	switch {
	case r.Owner == want:
		if r.Target != 0 {
			c.sendDrop(r.Target, key)
			r.Target = 0
			c.dirty[key] = true
		}
	case r.Owner == 0 || !c.isMember(r.Owner):
		// Nobody (alive or within grace) holds it: hand it over at once.
		if r.Target != 0 && r.Target != want {
			c.sendDrop(r.Target, key)
		}
		r.Owner, r.Target = want, 0
		c.dirty[key] = true
		c.sendAssign(want, key, true)
		c.broadcastState(key)
	case r.Target != want:
		if r.Target != 0 {
			c.sendDrop(r.Target, key)
		}
		r.Target = want
		c.dirty[key] = true
		c.sendAssign(want, key, true)
	}
}

// placeAll re-places every repository (after the member set changed).
// Caller holds c.mu.
func (c *Coordinator) placeAll() {
	for k := range c.repos {
		c.place(k)
	}
}

func (c *Coordinator) sendAssign(id uint32, key string, urgent bool) {
	if s := c.sessions[id]; s != nil {
		s.queueAssign(key, urgent)
	}
}

func (c *Coordinator) sendDrop(id uint32, key string) {
	if s := c.sessions[id]; s != nil {
		s.queueDrop(key)
	}
}

// broadcastState queues key's state to every full node. Caller holds c.mu.
func (c *Coordinator) broadcastState(key string) {
	for _, s := range c.sessions {
		if s.full {
			s.queueState(key)
		}
	}
}

// applyChanges reacts to membership transitions. Caller holds c.mu.
func (c *Coordinator) applyChanges(changes []membership.Change) {
	if len(changes) == 0 {
		return
	}
	c.memberDirty = true
	for _, ch := range changes {
		c.log.Info("node state changed", "node", ch.ID, "from", ch.From.String(), "to", ch.To.String())
		if ch.To == membership.Forgotten {
			delete(c.nodes, ch.ID)
			c.forget = append(c.forget, ch.ID)
		}
	}
	c.checkPlacing()
	if c.rebuildRing() {
		c.log.Info("placement members changed", "members", len(c.ring.Members()))
		c.placeAll()
	}
	c.signalPersist()
}

// checkPlacing ends the warm-up when its time or quorum has come. Caller
// holds c.mu.
func (c *Coordinator) checkPlacing() {
	if c.placing || !c.table.Placing(c.clk.Now()) {
		return
	}
	c.placing = true
	c.memberDirty = true
	c.log.Info("warm-up over: placing repositories", "members", len(c.table.Members()), "repos", len(c.repos))
	c.rebuildRing()
	c.placeAll()
}

// membershipLoop runs the membership timers.
func (c *Coordinator) membershipLoop(ctx interface{ Done() <-chan struct{} }) {
	for {
		c.mu.Lock()
		changes := c.table.Tick(c.clk.Now())
		c.applyChanges(changes)
		c.checkPlacing()
		wait := time.Second
		if next, ok := c.table.NextDeadline(); ok {
			if d := next.Sub(c.clk.Now()); d < wait {
				wait = max(d, 10*time.Millisecond)
			}
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-c.clk.After(wait):
		case <-c.wake:
		}
	}
}
