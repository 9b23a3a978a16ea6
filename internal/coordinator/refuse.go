package coordinator

import (
	"fmt"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A node refuses an assignment when its own policy (an egress policy
// stricter than the coordinator's) will not fetch the repository's URL. The
// engine remembers the refusal until the node's policy may have changed,
// which is at its next session (a node's policy is set when it starts): so
// each refusal is offered, logged and counted once, not in a loop.

// errorClassRefused is the error class of a node's refusal (node/report.go).
const errorClassRefused = "refused"

// refused records node id's refusal of key. Caller holds c.mu.
func (c *Coordinator) refused(id uint32, key repokey.Key, res *fleetv1.CheckResult) {
	if !c.engine.Refuse(id, key) {
		return // told already, or from a node that is not a member
	}
	c.cfg.met.refusal() // metrics.go
	c.placeDirty = true
	c.decide()
	if !c.engine.Unplaceable(key) {
		_, target := c.owner(key)
		c.log.Info("a node refuses a repository: placed on another node until the refusing node's policy changes",
			"node", id, "key", key, "to", target, "err", res.GetError())
		return
	}
	c.log.Warn("repository unplaceable: every node refuses it (their egress policies); it waits for a node that takes it",
		"node", id, "key", key, "err", res.GetError())
	r := c.statusOf(key)
	r.setError(fmt.Sprintf("%s: %s", errorClassRefused, res.GetError()), c.errs, key)
	if r.class = repostate.ClassFromWire(res.GetClass()); r.class == repostate.NoClass {
		r.class = repostate.ClassBlocked // a node of a previous version: its refusals were its egress policy's
	}
	c.dirty[key] = true
	c.broadcastState(key)
}

// liftRefusals forgets node id's refusals as it opens a new session, and
// places their keys again. Caller holds c.mu.
func (c *Coordinator) liftRefusals(id uint32) {
	lifted := c.engine.PolicyChanged(id)
	if len(lifted) == 0 {
		return
	}
	c.log.Info("a node's new session lifts its refusals: the repositories it refused may be offered to it again",
		"node", id, "repos", len(lifted))
	c.placeDirty = true
	for _, k := range lifted {
		c.broadcastState(k) // no longer unplaceable, maybe
	}
}

// stateSince is the state of key that nodes and the API are told, with
// the time it was first seen (unix ms, 0: unknown): its status's, or
// unplaceable when every member refused it. A forge's word (forgeflags.go)
// stands over the checks' when it says disabled, and over a working or new
// repository's when it says archived; a repository whose checks fail
// keeps their verdict. A rename (renames.go) stands over every state but
// these and legal: a renamed upstream's old path fails or redirects, and
// its new name is what to show. Caller holds c.mu.
func (c *Coordinator) stateSince(key repokey.Key, r *repoStatus) (repostate.State, int64) {
	if c.engine.Unplaceable(key) {
		return repostate.Unplaceable, 0
	}
	if rn, ok := c.renames[key]; ok && r.state != repostate.Legal && !c.forgeFlags[key].disabled {
		return repostate.Renamed, rn.since
	}
	if fl, ok := c.forgeFlags[key]; ok {
		switch {
		case fl.disabled:
			return repostate.Disabled, fl.since
		case fl.archived && (r.state == repostate.OK || r.state == repostate.Pending):
			return repostate.Archived, fl.since
		}
	}
	return r.state, r.since
}
