package placement

// What volunteers say of their machines (issue #26): a cap on the node's
// bandwidth, which makes its share of clones at once smaller, and active
// hours, outside which it rests: it gets no clones while another member
// can take them.

import "github.com/gitfleet/gitfleet/internal/repokey"

// nodeLimits is what a node's volunteer set, kept apart from nodeState,
// which is dropped with a node that leaves the members: a node that
// registers before it is a member keeps its cap.
type nodeLimits struct {
	slots   int  // clones at once; 0: MaxInFlight
	resting bool // outside its active hours
	// away are keys nobody served that went to another member while this
	// node rested; they come back to it, paced, once it is active.
	away []repokey.Key
}

func (e *Engine) limit(node uint32) *nodeLimits {
	l := e.limits[node]
	if l == nil {
		l = &nodeLimits{}
		e.limits[node] = l
	}
	return l
}

// SetBandwidth records a node's cap on its bandwidth, in bytes per second
// (0: none): a node capped below the reference bandwidth gets that share
// of MaxInFlight clones at once, at least one.
func (e *Engine) SetBandwidth(node uint32, bytesPerSecond uint64) {
	if node == 0 {
		return
	}
	slots := 0
	if ref := e.cfg.ReferenceBandwidth; bytesPerSecond > 0 && float64(bytesPerSecond) < ref {
		slots = max(1, int(float64(e.cfg.MaxInFlight)*float64(bytesPerSecond)/ref))
	}
	l := e.limit(node)
	if l.slots != slots {
		l.slots = slots
		e.ready[node] = true // more slots, maybe
	}
}

// slots is the most assigns node may have outstanding.
func (e *Engine) slots(node uint32) int {
	if l := e.limits[node]; l != nil && l.slots > 0 {
		return l.slots
	}
	return e.cfg.MaxInFlight
}

// SetResting records whether a node is outside its volunteer's active
// hours. While another member is active (neither resting nor full), a
// resting node is sent no clones: the keys that wait for it and that
// nobody serves go to the next active member clockwise, and come back to
// it, paced like any move, once it is active again; the moves whose old
// owner still serves the key wait for it. When every member rests, they
// all take clones as usual: no other node can.
func (e *Engine) SetResting(node uint32, resting bool) {
	if node == 0 {
		return
	}
	l := e.limit(node)
	if l.resting == resting {
		return
	}
	l.resting = resting
	if !resting {
		if len(l.away) > 0 {
			e.node(node) // Decisions brings them back through it
		}
		e.ready[node] = true
		return
	}
	if ns := e.nodes[node]; ns != nil {
		e.avoidQueued(node, ns)
	}
}

func (e *Engine) resting(node uint32) bool {
	l := e.limits[node]
	return l != nil && l.resting
}

// awake reports whether some member is active: neither resting nor full.
func (e *Engine) awake() bool {
	for _, m := range e.members {
		if !e.resting(m.ID) && !e.full(m.ID) {
			return true
		}
	}
	return false
}

// unavailable reports whether node takes no clone of a key nobody
// serves: its disk is full, or it rests while another member is active.
func (e *Engine) unavailable(node uint32) bool {
	return e.full(node) || e.resting(node) && e.awake()
}
