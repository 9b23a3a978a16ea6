// Package membership owns the fleet's view of which nodes are alive,
// suspect or gone, who takes part in placement and with what weight, when
// placement may start after a cold start, and which ID a node that
// registers gets (AllocateID: the smallest free one, never a revoked
// node's).
//
// It is a pure state machine: callers feed it session events and times and
// get back the state changes they cause. It must not do I/O, start
// goroutines or read the clock, and it does not place keys (package
// placement does, over ring, from Members).
//
// Every method that takes a time first applies the transitions that time
// has made due (heartbeat timeouts, grace and forget deadlines), so the
// outcome depends only on the events and their times, not on how often
// Tick runs, and each transition is returned exactly once. Members can also
// change without a state change (a node reconnecting with another weight, a
// flap penalty ending): a caller that places keys compares Members after
// each call. A Table is not safe for concurrent use.
package membership

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/ring"
)

// HistoryLen is how many transitions of each node are kept.
const HistoryLen = 32

// State is where a node is in its life cycle.
type State uint8

// The states of a node.
const (
	// Unknown is the From of a node's first Connect.
	Unknown State = iota
	// Alive: the node has a session and sends heartbeats.
	Alive
	// Suspect: the session dropped or heartbeats stopped; the node keeps
	// its repositories for its grace period.
	Suspect
	// Gone: suspect for longer than its grace; no longer a placement member.
	Gone
	// Forgotten: removed from the table (ForgetAfter, or Forget).
	Forgotten
)

var stateNames = [...]string{"unknown", "alive", "suspect", "gone", "forgotten"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// MarshalText encodes s by name.
func (s State) MarshalText() ([]byte, error) {
	if int(s) >= len(stateNames) {
		return nil, fmt.Errorf("membership: invalid state %d", s)
	}
	return []byte(stateNames[s]), nil
}

// UnmarshalText decodes a state name.
func (s *State) UnmarshalText(b []byte) error {
	i := slices.Index(stateNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("membership: unknown state %q", b)
	}
	*s = State(i)
	return nil
}

// Config holds the rules of membership. Start from DefaultConfig: zero
// values are taken literally (a zero Grace makes suspects gone at once).
type Config struct {
	// HeartbeatTimeout: an alive node with no heartbeat for this long
	// becomes suspect.
	HeartbeatTimeout time.Duration
	// Grace: a suspect node becomes gone after this long.
	Grace time.Duration
	// ForgetAfter: a gone node is forgotten after this long.
	ForgetAfter time.Duration
	// A node that went down (alive to suspect) more than FlapThreshold
	// times within less than FlapWindow is flapping until it has had no
	// down transition for FlapWindow. FlapThreshold must stay below
	// HistoryLen/2 for the history to hold enough downs.
	FlapWindow    time.Duration
	FlapThreshold int
	// A flapping node's grace is multiplied by FlapGraceFactor and its
	// placement weight by FlapWeightFactor.
	FlapGraceFactor  float64
	FlapWeightFactor float64
	// A table started from nothing places nothing until Warmup has passed
	// since its start or WarmupNodes placement members are alive
	// (0 disables the count), whichever comes first.
	Warmup      time.Duration
	WarmupNodes int
}

// DefaultConfig returns the default rules.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout: 15 * time.Second,
		Grace:            10 * time.Minute,
		ForgetAfter:      7 * 24 * time.Hour,
		FlapWindow:       time.Hour,
		FlapThreshold:    3,
		FlapGraceFactor:  3,
		FlapWeightFactor: 0.5,
		Warmup:           10 * time.Minute,
	}
}

// NodeInfo is what a node declares when it connects.
type NodeInfo struct {
	ID   uint32
	Name string
	// Weight is the declared capacity (1.0 = a standard node). A weight
	// that is not a finite number >= 0 is taken as 0: no placement.
	Weight float64
	// Member says whether the node takes part in placement.
	Member bool
}

// Change is one state transition of one node.
type Change struct {
	ID       uint32
	From, To State
	At       time.Time
}

// Transition is an entry of a node's history.
type Transition struct {
	From State     `json:"from"`
	To   State     `json:"to"`
	At   time.Time `json:"at"`
}

// NodeStatus describes a node for the API.
type NodeStatus struct {
	NodeInfo
	State         State
	Since         time.Time // when the node entered State
	LastHeartbeat time.Time
	Connected     bool
	History       []Transition // oldest first, at most HistoryLen
	Flapping      bool
	// EffectiveGrace is the grace of the node's current suspect period, or
	// of its next one if it is not suspect.
	EffectiveGrace time.Duration
	// EffectiveWeight is the placement weight after the flap penalty; 0 if
	// the node is not a placement member.
	EffectiveWeight float64
}

type node struct {
	info          NodeInfo
	state         State
	since         time.Time
	lastHeartbeat time.Time
	connected     bool
	history       []Transition
	// flapping is set by a down that completes more than FlapThreshold
	// downs within FlapWindow and cleared by a down that follows a stable
	// FlapWindow; in between it lasts until lastDown + FlapWindow.
	flapping bool
	lastDown time.Time
}

// Table is the membership of the fleet.
type Table struct {
	cfg     Config
	start   time.Time
	now     time.Time // the latest time fed
	placing bool      // warm-up is over
	nodes   map[uint32]*node
}

// New returns an empty table started at start, in warm-up.
func New(cfg Config, start time.Time) *Table {
	t := &Table{cfg: cfg, start: start, now: start, nodes: map[uint32]*node{}}
	t.endWarmup(start)
	return t
}

// Connect records that a node opened a session: it joins, or returns and is
// alive again. It updates the node's declared info.
func (t *Table) Connect(info NodeInfo, now time.Time) []Change {
	changes := t.tick(now)
	if !(info.Weight >= 0) || math.IsInf(info.Weight, 1) {
		info.Weight = 0
	}
	n := t.nodes[info.ID]
	if n == nil {
		n = &node{state: Unknown}
		t.nodes[info.ID] = n
	}
	n.info = info
	n.connected = true
	n.lastHeartbeat = now
	if n.state != Alive {
		changes = append(changes, t.move(n, Alive, now))
	}
	t.endWarmup(now)
	return changes
}

// Heartbeat records a heartbeat on a node's session; a suspect or gone node
// whose session is still open is alive again. Heartbeats of unknown or
// disconnected nodes are ignored: a node must Connect first.
func (t *Table) Heartbeat(id uint32, now time.Time) []Change {
	changes := t.tick(now)
	n := t.nodes[id]
	if n == nil || !n.connected {
		return changes
	}
	if now.After(n.lastHeartbeat) {
		n.lastHeartbeat = now
	}
	if n.state != Alive {
		changes = append(changes, t.move(n, Alive, now))
		t.endWarmup(now)
	}
	return changes
}

// Disconnect records that a node's session dropped: an alive node is
// suspect at once. It is for the node's current session: a caller that
// replaced a session by a newer one must not report the old one's end.
func (t *Table) Disconnect(id uint32, now time.Time) []Change {
	changes := t.tick(now)
	n := t.nodes[id]
	if n == nil || !n.connected {
		return changes
	}
	n.connected = false
	if n.state == Alive {
		changes = append(changes, t.move(n, Suspect, now))
	}
	return changes
}

// Forget removes a node from the table whatever its state (a revoked node).
// Whether its ID may be given again is AllocateID's rule, not the table's.
func (t *Table) Forget(id uint32, now time.Time) []Change {
	changes := t.tick(now)
	if n := t.nodes[id]; n != nil {
		changes = append(changes, Change{ID: id, From: n.state, To: Forgotten, At: now})
		delete(t.nodes, id)
	}
	return changes
}

// Tick applies the transitions due by now: alive to suspect after
// HeartbeatTimeout without a heartbeat, suspect to gone after the grace,
// gone to forgotten after ForgetAfter. Each Change carries the time its
// rule fired, not now, and changes come in order of time, then ID.
func (t *Table) Tick(now time.Time) []Change { return t.tick(now) }

func (t *Table) tick(now time.Time) []Change {
	if now.After(t.now) {
		t.now = now
	}
	var changes []Change
	for id, n := range t.nodes {
		for {
			at, to := t.due(n)
			if at.After(now) {
				break
			}
			changes = append(changes, t.move(n, to, at))
			if to == Forgotten {
				delete(t.nodes, id)
				break
			}
		}
	}
	// Map order is random; each node's transitions depend on it alone.
	slices.SortFunc(changes, func(a, b Change) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	t.endWarmup(now)
	return changes
}

// due is the next time-driven transition of n.
func (t *Table) due(n *node) (time.Time, State) {
	switch n.state {
	case Alive:
		return n.lastHeartbeat.Add(t.cfg.HeartbeatTimeout), Suspect
	case Suspect:
		return n.since.Add(t.grace(n, n.since)), Gone
	default:
		return n.since.Add(t.cfg.ForgetAfter), Forgotten
	}
}

// move records a transition of n and returns it as a Change.
func (t *Table) move(n *node, to State, at time.Time) Change {
	c := Change{ID: n.info.ID, From: n.state, To: to, At: at}
	if to == Forgotten {
		return c
	}
	n.history = append(n.history, Transition{From: n.state, To: to, At: at})
	if len(n.history) > HistoryLen {
		n.history = slices.Delete(n.history, 0, len(n.history)-HistoryLen)
	}
	n.state, n.since = to, at
	if c.From == Alive && to == Suspect {
		t.down(n, at)
	}
	return c
}

// down updates the flapping of n after it went down at at.
func (t *Table) down(n *node, at time.Time) {
	if !n.lastDown.IsZero() && at.Sub(n.lastDown) >= t.cfg.FlapWindow {
		n.flapping = false
	}
	n.lastDown = at
	downs := 0
	for _, h := range n.history {
		if h.From == Alive && h.To == Suspect && at.Sub(h.At) < t.cfg.FlapWindow {
			downs++
		}
	}
	if downs > t.cfg.FlapThreshold {
		n.flapping = true
	}
}

// flapping reports whether n is flapping at at.
func (t *Table) flapping(n *node, at time.Time) bool {
	return n.flapping && at.Sub(n.lastDown) < t.cfg.FlapWindow
}

// grace is the grace of a suspect period of n starting at at.
func (t *Table) grace(n *node, at time.Time) time.Duration {
	if t.flapping(n, at) {
		return time.Duration(float64(t.cfg.Grace) * t.cfg.FlapGraceFactor)
	}
	return t.cfg.Grace
}

// weight is the placement weight of n now, 0 if it takes no part.
func (t *Table) weight(n *node) float64 {
	if !n.info.Member || (n.state != Alive && n.state != Suspect) {
		return 0
	}
	if t.flapping(n, t.now) {
		return n.info.Weight * t.cfg.FlapWeightFactor
	}
	return n.info.Weight
}

func (t *Table) endWarmup(now time.Time) {
	if t.placing {
		return
	}
	if now.Sub(t.start) >= t.cfg.Warmup {
		t.placing = true
		return
	}
	if t.cfg.WarmupNodes <= 0 {
		return
	}
	alive := 0
	for _, n := range t.nodes {
		if n.state == Alive && n.info.Member {
			alive++
		}
	}
	t.placing = alive >= t.cfg.WarmupNodes
}

// Placing reports whether placement may run at now: false during the
// warm-up of a table started from nothing, true for a restored table.
func (t *Table) Placing(now time.Time) bool {
	return t.placing || now.Sub(t.start) >= t.cfg.Warmup
}

// Members returns the placement members by ID, as of the latest time fed:
// alive or suspect nodes with Member set and a weight > 0, with the flap
// penalty applied.
func (t *Table) Members() []ring.Member {
	var ms []ring.Member
	for id, n := range t.nodes {
		if w := t.weight(n); w > 0 {
			ms = append(ms, ring.Member{ID: id, Weight: w})
		}
	}
	slices.SortFunc(ms, func(a, b ring.Member) int { return cmp.Compare(a.ID, b.ID) })
	return ms
}

// Nodes describes every node in the table by ID, as of the latest time fed.
func (t *Table) Nodes() []NodeStatus {
	out := make([]NodeStatus, 0, len(t.nodes))
	for _, n := range t.nodes {
		g := t.grace(n, t.now)
		if n.state == Suspect {
			g = t.grace(n, n.since)
		}
		out = append(out, NodeStatus{
			NodeInfo:        n.info,
			State:           n.state,
			Since:           n.since,
			LastHeartbeat:   n.lastHeartbeat,
			Connected:       n.connected,
			History:         slices.Clone(n.history),
			Flapping:        t.flapping(n, t.now),
			EffectiveGrace:  g,
			EffectiveWeight: t.weight(n),
		})
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// NextDeadline returns the earliest time at which Tick has a transition to
// report, a flap penalty ends or the warm-up ends; false if there is none.
func (t *Table) NextDeadline() (time.Time, bool) {
	var next time.Time
	found := false
	consider := func(at time.Time) {
		if !found || at.Before(next) {
			next, found = at, true
		}
	}
	if !t.placing {
		consider(t.start.Add(t.cfg.Warmup))
	}
	for _, n := range t.nodes {
		at, _ := t.due(n)
		consider(at)
		if t.flapping(n, t.now) {
			consider(n.lastDown.Add(t.cfg.FlapWindow))
		}
	}
	return next, found
}

// AllocateID returns the ID of a node that registers for the first time:
// the smallest ID >= 1 that registered does not hold. registered is the
// caller's record of every node that was given an ID, and it must keep a
// revoked node's record for good: a revoked ID is never given again, as
// the node's old credential and the full nodes' list of revoked IDs still
// name it. The ID of a node that was forgotten without being revoked is
// free once its record is deleted.
//
// The table alone cannot tell: it forgets a revoked node at once (Forget),
// and it has not seen a node that registered but has not connected yet.
func AllocateID[V any](registered map[uint32]V) uint32 {
	id := uint32(1)
	for {
		if _, taken := registered[id]; !taken {
			return id
		}
		id++
	}
}

// DefaultRevokeReason is the reason of a revocation that gives none, as the
// coordinator records it and the full node's API reports it.
const DefaultRevokeReason = "revoked by an operator"

// NotInFleet is the error text about a node ID that no registered node
// has, as the coordinator and the full node's API say it.
func NotInFleet(id uint32) string { return fmt.Sprintf("node %d is not in the fleet", id) }

const snapshotVersion = 1

type snapshot struct {
	Version int            `json:"version"`
	Nodes   []snapshotNode `json:"nodes"`
}

type snapshotNode struct {
	ID            uint32       `json:"id"`
	Name          string       `json:"name"`
	Weight        float64      `json:"weight"`
	Member        bool         `json:"member"`
	State         State        `json:"state"`
	Since         time.Time    `json:"since"`
	LastHeartbeat time.Time    `json:"last_heartbeat"`
	History       []Transition `json:"history"`
	Flapping      bool         `json:"flapping"`
	LastDown      time.Time    `json:"last_down"`
}

// Snapshot encodes the table as JSON for Restore.
func (t *Table) Snapshot() []byte {
	s := snapshot{Version: snapshotVersion, Nodes: make([]snapshotNode, 0, len(t.nodes))}
	for _, n := range t.nodes {
		s.Nodes = append(s.Nodes, snapshotNode{
			ID:            n.info.ID,
			Name:          n.info.Name,
			Weight:        n.info.Weight,
			Member:        n.info.Member,
			State:         n.state,
			Since:         n.since,
			LastHeartbeat: n.lastHeartbeat,
			History:       n.history,
			Flapping:      n.flapping,
			LastDown:      n.lastDown,
		})
	}
	slices.SortFunc(s.Nodes, func(a, b snapshotNode) int { return cmp.Compare(a.ID, b.ID) })
	b, err := json.Marshal(s)
	if err != nil {
		// Weights are finite and states valid by construction.
		panic(fmt.Sprintf("membership: encoding snapshot: %v", err))
	}
	return b
}

// Restore rebuilds a table from a Snapshot, as of now. Alive and suspect
// nodes start suspect as of now, with a fresh grace, so that a coordinator
// restart moves nothing and nodes have time to reconnect; gone nodes stay
// gone. A restored table is not in warm-up.
func Restore(cfg Config, data []byte, now time.Time) (*Table, error) {
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("membership: decoding snapshot: %w", err)
	}
	if s.Version != snapshotVersion {
		return nil, fmt.Errorf("membership: snapshot version %d, want %d", s.Version, snapshotVersion)
	}
	t := &Table{cfg: cfg, start: now, now: now, placing: true, nodes: make(map[uint32]*node, len(s.Nodes))}
	for _, sn := range s.Nodes {
		if t.nodes[sn.ID] != nil {
			return nil, fmt.Errorf("membership: snapshot has node %d twice", sn.ID)
		}
		if !(sn.Weight >= 0) {
			return nil, fmt.Errorf("membership: snapshot node %d has weight %g", sn.ID, sn.Weight)
		}
		n := &node{
			info:          NodeInfo{ID: sn.ID, Name: sn.Name, Weight: sn.Weight, Member: sn.Member},
			state:         sn.State,
			since:         sn.Since,
			lastHeartbeat: sn.LastHeartbeat,
			history:       sn.History,
			flapping:      sn.Flapping,
			lastDown:      sn.LastDown,
		}
		switch sn.State {
		case Alive, Suspect:
			n.state, n.since = Suspect, now
		case Gone:
		default:
			return nil, fmt.Errorf("membership: snapshot node %d is %v", sn.ID, sn.State)
		}
		if len(n.history) > HistoryLen {
			n.history = n.history[len(n.history)-HistoryLen:]
		}
		t.nodes[sn.ID] = n
	}
	return t, nil
}
