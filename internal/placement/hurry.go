package placement

import "github.com/gitfleet/gitfleet/internal/repokey"

// Hurry sends key's assign at once when it is queued for a slot on its
// target, beyond the pacing of MaxInFlight: someone asked for this key
// (an on-demand check, a webhook), and when a large catalog has just
// arrived, its turn could be hours away. It reports whether an assign was
// released; the decision comes out of the next Decisions call.
func (e *Engine) Hurry(key repokey.Key) bool {
	i, ok := e.index.get(e.keys, key)
	if !ok || e.keys[i].flags&flagQueued == 0 {
		return false
	}
	node := e.keys[i].target
	ns := e.nodes[node]
	if ns == nil || !e.isMember(node) || ns.disk == diskFull {
		return false
	}
	o := e.keys[i].owner
	e.keys[i].flags = flagSent // its entries in the target's queues are now stale
	ns.queued--
	ns.inFlight++
	e.emit(Decision{Kind: Assign, Node: node, Key: key, Urgent: true, From: o})
	return true
}
