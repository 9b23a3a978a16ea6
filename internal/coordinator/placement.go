package coordinator

import (
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// The rules of placement live in package placement (a pure engine); this
// file feeds it and carries out its decisions.

// setMembers gives the engine the current placement members. Caller holds c.mu.
func (c *Coordinator) setMembers() {
	if !c.placing {
		return
	}
	members := c.table.Members()
	if slices.Equal(members, c.members) {
		return // SetMembers recomputes every key: only when they change
	}
	c.members = members
	c.engine.SetMembers(members)
	c.placeDirty = true
	for _, k := range c.engine.Refused() {
		c.broadcastState(k) // unplaceable or not, as the members now are
	}
}

// decide drains the engine's decisions onto the nodes' sessions. Caller
// holds c.mu.
func (c *Coordinator) decide() {
	for _, d := range c.engine.Decisions() {
		c.placeDirty = true
		c.cfg.met.decided(d) // metrics.go
		s := c.sessions[d.Node]
		switch d.Kind {
		case placement.Assign:
			if s != nil {
				// A key that had an owner is on the full nodes: clone it
				// from there rather than from the upstream.
				s.queueAssignSeed(d.Key, d.Urgent, d.From != 0)
			}
			c.broadcastState(d.Key)
		case placement.Drop:
			if s != nil {
				s.queueDrop(d.Key)
			}
		}
	}
	c.resplit()
	c.syncTier() // tier.go
}

// seedBase is the public URL of a connected full node other than the
// receiving node, to clone moved repositories from. Caller holds c.mu.
func (c *Coordinator) seedBase(receiver uint32) string {
	for id, s := range c.sessions {
		if rec := c.nodes[id]; s.full && id != receiver && rec != nil && rec.PublicURL != "" {
			return strings.TrimSuffix(rec.PublicURL, "/")
		}
	}
	return ""
}

// owner returns key's confirmed owner and target.
func (c *Coordinator) owner(key repokey.Key) (owner, target uint32) {
	o, t, _ := c.engine.Owner(key)
	return o, t
}

// broadcastState queues key's state to every full node. Caller holds c.mu.
func (c *Coordinator) broadcastState(key repokey.Key) {
	for _, s := range c.sessions {
		if s.full {
			s.queueState(key)
		}
	}
}

// fullSessions returns the sessions of full nodes. Caller holds c.mu.
func (c *Coordinator) fullSessions() []*session {
	var full []*session
	for _, s := range c.sessions {
		if s.full {
			full = append(full, s)
		}
	}
	return full
}

// applyChanges reacts to membership transitions. Caller holds c.mu.
func (c *Coordinator) applyChanges(changes []membership.Change) {
	if len(changes) == 0 {
		return
	}
	c.memberDirty = true
	c.tierMembersDirty = true // tier.go
	for _, ch := range changes {
		c.log.Info("node state changed", "node", ch.ID, "from", ch.From.String(), "to", ch.To.String())
		if rec := c.nodes[ch.ID]; ch.To == membership.Forgotten && (rec == nil || !rec.Revoked) {
			// A revoked node's record stays: its ID is never reused.
			delete(c.nodes, ch.ID)
			c.forget = append(c.forget, ch.ID)
			c.queueCredentials(ch.ID)
		}
	}
	c.checkPlacing()
	c.setMembers()
	c.decide()
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
	c.log.Info("warm-up over: placing repositories", "members", len(c.table.Members()), "repos", c.engine.Len())
	c.setMembers()
	c.decide()
}

// membershipLoop runs the membership timers.
func (c *Coordinator) membershipLoop(ctx interface{ Done() <-chan struct{} }) {
	for {
		c.mu.Lock()
		c.applyChanges(c.table.Tick(c.clk.Now()))
		c.checkPlacing()
		// The flap penalty can end without a transition: members may change.
		c.setMembers()
		c.decide()
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
		}
	}
}
