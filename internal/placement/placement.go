// Package placement owns the assignment of repository keys to nodes: for
// every key its confirmed owner and, during a make-before-break move, its
// target (the owner-to-be); the overrides that keep a key off a node that
// handed it back, and the refusals that keep it off a node whose policy
// refuses it; and the pacing of clones, at most MaxInFlight per node, fewer
// on a node whose volunteer capped its bandwidth, none on a resting one
// while another can take them (volunteer.go).
//
// It is a pure state machine, the functional core of the coordinator's
// placement: the coordinator feeds it the catalog's keys (AddKeys,
// RemoveKeys), the placement members that package membership computes
// (SetMembers), and what nodes report (Confirm, CloneFailed, Hold, SetDisk,
// HandBack, Refuse, PolicyChanged, SetBandwidth, SetResting), and drains
// Decisions (assign, drop) to
// send on the nodes' sessions. It does no I/O and does not read the clock,
// and it does not decide who is a member or how long a node may be away
// (package membership does). Its one goroutine runs when keys are loaded
// into an engine that has none (AddKeys, AddKeySeq, Restore): it sums the
// keys' hashes on another core while the index is built, reads nothing but
// the keys, and the call waits for it before it returns, so nothing the
// engine starts outlives a call.
//
// The desired owner of a key is a pure function of the members, the key set
// and the overrides: the bounded-load placement of package ring, then, for a
// key with overrides, the first member clockwise from the key that it does
// not avoid. So the same inputs give the same owners whatever the order of
// the events that led to them, and a coordinator restarted from a Snapshot
// with the same members moves nothing.
//
// The full tier is placed apart, by a Tier (tier.go): each unit (a fork
// network or a standalone repository) on several full nodes, on the same
// ring, make-before-break per replica.
//
// A move is make-before-break: the target clones and confirms, and only then
// is the old owner told to drop the key. A key whose owner is no longer a
// member (gone past its grace) has nobody serving it: its assignment goes to
// the front of its new node's queue, marked urgent. A new key (or one whose
// owner left) is never sent to a node with a full disk: it goes to the next
// member, and that is remembered as an override until the full node has
// room again.
//
// A node that refuses a key (its egress policy, stricter than the
// coordinator's, will not fetch the URL: Refuse) is never offered that key
// again until its policy may have changed (PolicyChanged, on its next
// session): the key goes to the next member clockwise that has not refused
// it, or, if every member has, it is unplaceable (Unplaceable) and keeps
// the owner it had, if any, until a member can take it. Refusals are not in
// snapshots: a restarted coordinator offers each such key once more.
//
// SetMembers recomputes the placement of every key. AddKeys and RemoveKeys
// cost time in proportion to the keys they change, not to the key set: the
// load bound could make a key's owner depend on the whole key set, but as
// long as no member reaches its bound (the common case, see ring's
// DefaultVnodesPerWeight) every key's bounded-load owner is its plain
// consistent-hash owner, and adding or removing keys leaves the others
// where they are. Only a change made while a member is at its bound, or one
// that would put a member over it, places every key again (with the same
// result: the placement never depends on the order of the changes). Decisions is cheap; call it after every batch of events. An
// Engine is not safe for concurrent use.
package placement

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// Defaults of Config.
const (
	DefaultMaxInFlight   = 50
	DefaultDiskHighWater = 0.85
	DefaultDiskLowWater  = 0.75
	// DefaultReferenceBandwidth is 100 Mbit/s, in bytes per second.
	DefaultReferenceBandwidth = 100e6 / 8
)

// Config tunes an Engine. The zero value means the defaults.
type Config struct {
	// LoadFactor bounds a member's keys to LoadFactor times its weight
	// share (ring.DefaultLoadFactor if <= 0).
	LoadFactor float64
	// VnodesPerWeight is the number of ring points of a member of weight
	// 1.0 (ring.DefaultVnodesPerWeight if <= 0).
	VnodesPerWeight int
	// MaxInFlight caps the clones a node has been told to make and has not
	// confirmed yet (DefaultMaxInFlight if <= 0).
	MaxInFlight int
	// DiskHighWater: a node whose disk is used above this share takes no
	// new clones (DefaultDiskHighWater if not in (0, 1]).
	DiskHighWater float64
	// DiskLowWater: once a node's disk is used below this share, the keys
	// it handed back return to it, paced like any move
	// (DefaultDiskLowWater if not in (0, DiskHighWater]). The gap between
	// the marks keeps a node from taking back what it just handed back.
	DiskLowWater float64
	// ReferenceBandwidth (bytes per second) is the bandwidth of a node
	// that gets MaxInFlight clones at once: a node capped below it gets a
	// share in proportion, at least one (DefaultReferenceBandwidth if
	// <= 0).
	ReferenceBandwidth float64
	// NetworkShare bounds a fork network's part to this share of the keys
	// the smallest member may hold; a larger network is split into parts
	// placed apart (DefaultNetworkShare if not in (0, 1]).
	NetworkShare float64
}

func (c Config) withDefaults() Config {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if !(c.DiskHighWater > 0 && c.DiskHighWater <= 1) {
		c.DiskHighWater = DefaultDiskHighWater
	}
	if !(c.DiskLowWater > 0 && c.DiskLowWater <= c.DiskHighWater) {
		c.DiskLowWater = min(DefaultDiskLowWater, c.DiskHighWater)
	}
	if !(c.ReferenceBandwidth > 0) {
		c.ReferenceBandwidth = DefaultReferenceBandwidth
	}
	if !(c.NetworkShare > 0 && c.NetworkShare <= 1) {
		c.NetworkShare = DefaultNetworkShare
	}
	return c
}

// Kind says what a Decision asks of a node.
type Kind uint8

// The kinds of decisions.
const (
	// Assign: the node must clone the key (then confirm) and keep it.
	Assign Kind = iota + 1
	// Drop: the node must delete its copy of the key.
	Drop
)

func (k Kind) String() string {
	switch k {
	case Assign:
		return "assign"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Decision is an order for one node about one key.
type Decision struct {
	Kind Kind
	Node uint32
	Key  repokey.Key
	// Urgent (assign only): nobody serves the key now (its owner is gone);
	// the node should clone it before its other work.
	Urgent bool
	// From (assign only) is the key's previous owner, 0 for a key nobody
	// has mirrored yet: when it is set, the full node has a copy to clone
	// from, which spares the upstream.
	From uint32
}

// keyState is what the engine knows of a key: 32 bytes, so that Owner reads
// one cache line of it.
type keyState struct {
	key    repokey.Key
	owner  uint32 // confirmed owner, 0 if none
	target uint32 // owner-to-be during a move, 0 if none
	place  uint32 // bounded-load placement without overrides; 0 without members
	flags  uint8
	inNet  bool // placed with its fork network (network.go)
	// size is the caller's 16-bit figure of the key (the coordinator: its
	// repository's size, as the full tier weighs it), kept in the spare
	// bytes of the record: it costs nothing a key.
	size uint16
}

// Per-key flags. A key with a target is either queued (waiting for a slot
// on the target) or sent (the assign is out, the clone in flight). A sent
// key whose clone failed is also marked failed: a clone slot is a lease
// that a failure ends, and the target retries the clone on its own
// schedule (its backoff), outside the pacing, until it confirms.
const (
	flagQueued uint8 = 1 << iota
	flagSent
	flagInUrgent // queued and pushed to its target's urgent queue
	flagFailed   // sent, its clone failed: it holds no slot
)

// Disk levels of a node.
const (
	diskOK   uint8 = iota // unknown, or between the marks
	diskFull              // above DiskHighWater: no new clones
	diskRoom              // below DiskLowWater: handed-back keys return
)

// Engine holds the placement of every key. Create it with New or Restore.
type Engine struct {
	cfg Config

	// The keys, by index; RemoveKeys moves the last key into the hole.
	keys  []keyState
	index keyIndex
	// digest identifies the key set whatever its order, for snapshots:
	// the sum of the keys' ring.Hash.
	digest uint64

	members []ring.Member  // by ID, weights > 0
	rank    map[uint32]int // member ID -> index in members
	ring    *ring.Ring     // nil until there are members

	// The load bound, per member (by index in members): held is the
	// number of keys placed on it; share times the number of keys,
	// rounded up, is its bound, as ring.Place computes it. plain reports
	// that every key is known to be placed on its plain consistent-hash
	// owner (ring.Lookup), which is the case when no member is above its
	// bound under plain hashing: then keys can be added and removed
	// without placing the others again (see AddKeys).
	held  []int
	share []float64
	plain bool
	// placements counts the placements of every key, for tests.
	placements int

	overrides map[repokey.Key][]uint32 // key -> members it must avoid
	refused   map[repokey.Key][]uint32 // key -> members that refused it (Refuse)
	nodes     map[uint32]*nodeState
	ready     map[uint32]bool // nodes Decisions must look at
	moving    int             // keys with a target
	owned     map[uint32]int  // keys each node owns (confirmed), for Load; see setOwner
	out       []Decision
	// limits are what volunteers set (volunteer.go).
	limits map[uint32]*nodeLimits

	// Fork networks (network.go): the network of each key given
	// (SetNetworks), the networks of the key set, how many networks have
	// each size, the part limit they were placed with, whether a
	// network's size changed its number of parts since, and the networks
	// whose number of parts changed since the last Resplit.
	netOf    map[repokey.Key]string
	nets     map[string]*netState
	sizes    map[int]int
	netLimit int
	resplit  bool
	resplits map[string]bool
}

// nodeState is what the engine tracks of a node.
type nodeState struct {
	inFlight int // keys targeted here with the assign sent
	queued   int // keys targeted here waiting for a slot
	// Queues of key indexes; an entry is stale (and skipped) unless the key
	// still targets this node and is queued.
	urgent, normal queue
	disk           uint8
	back           []repokey.Key // keys avoiding this node, to bring back while it has room
}

// queue is a FIFO of key indexes.
type queue struct {
	items []int32
	head  int
}

func (q *queue) push(i int32) { q.items = append(q.items, i) }

func (q *queue) pop() (int32, bool) {
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
		return 0, false
	}
	i := q.items[q.head]
	q.head++
	if q.head >= 1024 && q.head*2 >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		q.items, q.head = q.items[:n], 0
	}
	return i, true
}

// New returns an engine with no keys and no members.
func New(cfg Config) *Engine {
	return &Engine{
		cfg:       cfg.withDefaults(),
		index:     newKeyIndex(),
		rank:      map[uint32]int{},
		overrides: map[repokey.Key][]uint32{},
		refused:   map[repokey.Key][]uint32{},
		nodes:     map[uint32]*nodeState{},
		limits:    map[uint32]*nodeLimits{},
		ready:     map[uint32]bool{},
		owned:     map[uint32]int{},
		netOf:     map[repokey.Key]string{},
		nets:      map[string]*netState{},
		sizes:     map[int]int{},
	}
}

// AddKeys adds keys to the catalog (keys already known and empty keys are
// ignored) and places them: a new key is assigned to its desired owner,
// paced like any clone. It takes time in proportion to the keys given,
// unless the load bound makes it place every key again (see above).
func (e *Engine) AddKeys(keys ...repokey.Key) {
	e.AddKeySeq(len(keys), slices.Values(keys))
}

// AddKeySeq is AddKeys for the keys of an iterator, of which there are
// about n: a catalog's keys, without a list of a million strings.
func (e *Engine) AddKeySeq(n int, keys iter.Seq[repokey.Key]) {
	from := len(e.keys)
	if !e.addKeys(n, keys) || e.ring == nil {
		return
	}
	if !e.placeAdded(from) {
		e.replaceChanged(from)
		return
	}
	for i := from; i < len(e.keys); i++ {
		e.apply(int32(i))
	}
}

func (e *Engine) addKeys(n int, keys iter.Seq[repokey.Key]) bool {
	if len(e.keys) == 0 && n > 0 && n < math.MaxInt32 {
		// Loading a catalog: size everything once, and index the keys in
		// one pass unless one is listed twice.
		e.keys = make([]keyState, 0, n)
		for k := range keys {
			if k != "" {
				e.keys = append(e.keys, keyState{key: k})
			}
		}
		if len(e.keys) < math.MaxInt32 {
			e.index.reserve(len(e.keys))
			// The digest on the other core while the index is built: both
			// are a pass over a million strings.
			digest := make(chan uint64, 1)
			go func() {
				var d uint64
				for i := range e.keys {
					d += ring.Hash(string(e.keys[i].key))
				}
				digest <- d
			}()
			built := e.index.build(e.keys)
			d := <-digest
			if built {
				e.digest += d
				if len(e.netOf) > 0 {
					for i := range e.keys {
						e.joinNet(int32(i))
					}
				}
				return len(e.keys) > 0
			}
		}
		all := e.keys
		e.keys = make([]keyState, 0, len(all))
		keys = func(yield func(repokey.Key) bool) {
			for _, k := range all {
				if !yield(k.key) {
					return
				}
			}
		}
	}
	added := false
	for k := range keys {
		if k == "" {
			continue
		}
		if len(e.keys) == math.MaxInt32 {
			panic("placement: more than 2^31-1 keys")
		}
		if !e.index.insert(e.keys, k, int32(len(e.keys))) {
			continue // known already
		}
		e.keys = append(e.keys, keyState{key: k})
		e.joinNet(int32(len(e.keys) - 1))
		e.digest += ring.Hash(string(k))
		added = true
	}
	return added
}

// RemoveKeys removes keys from the catalog: their owners and targets are
// told to drop them. Unknown keys are ignored. Like AddKeys, it takes time
// in proportion to the keys given, unless the load bound makes it place
// every key again.
func (e *Engine) RemoveKeys(keys ...repokey.Key) {
	removed := false
	for _, k := range keys {
		i, ok := e.index.get(e.keys, k)
		if !ok {
			continue
		}
		if e.ring != nil {
			e.held[e.rank[e.keys[i].place]]--
		}
		if o := e.keys[i].owner; o != 0 && e.isMember(o) {
			e.emit(Decision{Kind: Drop, Node: o, Key: k})
		}
		e.cancel(i)
		delete(e.overrides, k)
		delete(e.refused, k)
		e.leaveNet(i)
		e.removeAt(i)
		e.digest -= ring.Hash(string(k))
		removed = true
	}
	if removed && e.ring != nil && !e.placeRemoved() {
		e.replaceChanged(len(e.keys))
	}
}

// removeAt deletes key i by moving the last key into its place.
func (e *Engine) removeAt(i int32) {
	e.setOwner(i, 0)
	e.index.remove(e.keys, e.keys[i].key)
	last := int32(len(e.keys) - 1)
	if i != last {
		e.keys[i] = e.keys[last]
		e.index.move(e.keys, e.keys[i].key, i)
		if e.keys[i].flags&flagQueued != 0 {
			// Its queue entries name the old index: queue it again.
			e.keys[i].flags &^= flagInUrgent
			e.enqueue(i)
		}
	}
	e.keys[last] = keyState{}
	e.keys = e.keys[:last]
}

// SetMembers sets the placement members (from package membership once its
// warm-up is over: alive nodes and suspect ones within their grace, with
// effective weights; members with an ID of 0 or a weight <= 0 are left out;
// IDs must be distinct) and, if they changed, recomputes the desired owner
// of every key and starts the moves. A key whose owner is still a member moves
// make-before-break; a key whose owner is not is assigned at once, urgent.
// An empty member set changes nothing: keys keep their owners until there
// are members again.
func (e *Engine) SetMembers(ms []ring.Member) {
	norm := make([]ring.Member, 0, len(ms))
	for _, m := range ms {
		if m.ID != 0 && m.Weight > 0 {
			norm = append(norm, m)
		}
	}
	slices.SortFunc(norm, func(a, b ring.Member) int { return cmp.Compare(a.ID, b.ID) })
	if slices.Equal(norm, e.members) {
		return
	}
	e.setRing(norm)
	for _, m := range []map[repokey.Key][]uint32{e.overrides, e.refused} {
		for k, ex := range m {
			ex = slices.DeleteFunc(ex, func(id uint32) bool { return !e.isMember(id) })
			if len(ex) == 0 {
				delete(m, k)
			} else {
				m[k] = ex
			}
		}
	}
	e.replace()
	for id, ns := range e.nodes {
		switch {
		case ns.queued > 0:
			e.ready[id] = true
		case !e.isMember(id) && ns.inFlight == 0:
			delete(e.nodes, id)
		}
	}
}

// setRing installs members (normalised) and their ring.
func (e *Engine) setRing(ms []ring.Member) {
	e.members = ms
	e.rank = make(map[uint32]int, len(ms))
	for i, m := range ms {
		e.rank[m.ID] = i
	}
	e.ring, e.plain = nil, false
	e.held, e.share = make([]int, len(ms)), make([]float64, len(ms))
	if len(ms) == 0 {
		return
	}
	e.ring = ring.New(ms, ring.Options{VnodesPerWeight: e.cfg.VnodesPerWeight, LoadFactor: e.cfg.LoadFactor})
	// The bound of ring.Place, computed the same way (the same float
	// operations in the same order, so the same result): the load factor
	// as ring.New takes it, the weights as the ring counts them.
	factor := e.cfg.LoadFactor
	switch {
	case factor <= 0:
		factor = ring.DefaultLoadFactor
	case factor < 1:
		factor = 1
	}
	rws := e.ring.Members()
	var total float64
	for _, m := range rws {
		total += m.Weight
	}
	for j, m := range rws {
		e.share[j] = factor * m.Weight / total
	}
}

func (e *Engine) isMember(id uint32) bool {
	_, ok := e.rank[id]
	return ok
}

// bound is the most keys ring.Place lets member j hold among n keys.
func (e *Engine) bound(j, n int) int { return int(math.Ceil(e.share[j] * float64(n))) }

// placeAll computes the bounded-load placement of every key from scratch.
func (e *Engine) placeAll() {
	e.placements++
	e.netLimit, e.resplit = e.partLimit(), false
	if len(e.nets) > 0 {
		e.placeUnits()
		return
	}
	names := make([]string, len(e.keys))
	for i := range e.keys {
		names[i] = string(e.keys[i].key)
	}
	clear(e.held)
	for i, id := range e.ring.Place(names) {
		e.keys[i].place = id
		e.held[e.rank[id]]++
	}
	// A key leaves its plain consistent-hash owner only when that member
	// is full, so a member below its bound has displaced none of its keys.
	// One at its bound may have: take it that it did.
	e.plain = true
	for j, h := range e.held {
		if h > 0 && h >= e.bound(j, len(e.keys)) {
			e.plain = false
		}
	}
}

// placeAdded places the keys from index from on, just added, without
// placing the others again, and reports whether that gives what placing
// every key would. It does if every key was on its plain consistent-hash
// owner (plain) and the new keys can go to theirs: no member gets more
// than its bound, which only grows with the number of keys. Otherwise the
// caller must place every key (replaceChanged).
func (e *Engine) placeAdded(from int) bool {
	if !e.plain || !e.partsStable() {
		e.plain = false
		return false
	}
	added := e.keys[from:]
	for i := range added {
		id, _ := e.ring.Lookup(e.unit(int32(from + i)))
		added[i].place = id
		e.held[e.rank[id]]++
	}
	for i := range added {
		if j := e.rank[added[i].place]; e.held[j] > e.bound(j, len(e.keys)) {
			e.plain = false
			return false
		}
	}
	return true
}

// placeRemoved reports whether the placement, with keys just removed (and
// held counted down), is still what placing every key would give: it is
// if every key was on its plain consistent-hash owner (plain) and no
// member is above its bound, which shrinks with the number of keys.
func (e *Engine) placeRemoved() bool {
	if !e.plain || !e.partsStable() {
		e.plain = false
		return false
	}
	for j, h := range e.held {
		if h > e.bound(j, len(e.keys)) {
			e.plain = false
			return false
		}
	}
	return true
}

// replace places every key and moves every key towards its desired owner.
func (e *Engine) replace() {
	if e.ring == nil {
		return
	}
	e.placeAll()
	for i := range e.keys {
		e.apply(int32(i))
	}
}

// replaceChanged places every key after a catalog change and moves the
// keys whose placement changed, and the keys from index from on (just
// added), towards their desired owners. The other keys' desired owners
// have not changed.
func (e *Engine) replaceChanged(from int) {
	old := make([]uint32, from)
	for i := range old {
		old[i] = e.keys[i].place
	}
	e.placeAll()
	for i := range e.keys {
		if i >= from || old[i] != e.keys[i].place {
			e.apply(int32(i))
		}
	}
}

// want is the desired owner of key i: its bounded-load placement, or, if
// it must avoid that member, the first member clockwise that it need not
// avoid. A member that refused the key is never its desired owner: when
// every member avoids the key, the first that did not refuse it is, and
// when every member refused it, nobody is (0, as without members).
func (e *Engine) want(i int32) uint32 {
	if e.ring == nil {
		return 0
	}
	p := e.keys[i].place
	if len(e.overrides) == 0 && len(e.refused) == 0 {
		return p
	}
	k := e.keys[i].key
	ex, no := e.overrides[k], e.refused[k]
	if !slices.Contains(ex, p) && !slices.Contains(no, p) {
		return p
	}
	// The members clockwise from the key's unit: where the rest of its
	// network would go too.
	u := e.unit(i)
	if len(no) == 0 {
		for _, id := range e.ring.LookupN(u, len(ex)+1) {
			if !slices.Contains(ex, id) {
				return id
			}
		}
		return p // it avoids every member: keep the placement
	}
	// Among len(ex)+len(no)+1 members one is neither avoided nor refusing,
	// unless there are fewer members: then they are all here.
	var fallback uint32
	for _, id := range e.ring.LookupN(u, len(ex)+len(no)+1) {
		switch {
		case slices.Contains(no, id):
		case !slices.Contains(ex, id):
			return id
		case fallback == 0:
			fallback = id
		}
	}
	return fallback
}

// live reports whether id is a node that serves what it owns.
func (e *Engine) live(id uint32) bool { return id != 0 && e.isMember(id) }

func (e *Engine) full(id uint32) bool {
	ns := e.nodes[id]
	return ns != nil && ns.disk == diskFull
}

// apply moves key i towards its desired owner.
func (e *Engine) apply(i int32) {
	w := e.want(i)
	if w == 0 {
		if e.ring != nil {
			e.cancel(i) // every member refused it: nobody is to clone it
		}
		return
	}
	o := e.keys[i].owner
	if !e.live(o) && e.unavailable(w) {
		// Nobody serves the key: it cannot wait for this disk, or for
		// this node's hours while another node is active.
		e.avoidUnavailable(i)
		w = e.want(i)
	}
	switch {
	case o == w:
		e.cancel(i)
	case e.keys[i].target == w:
		// The owner may have left since the move started: the key is
		// urgent now.
		if o != 0 && !e.isMember(o) && e.keys[i].flags&(flagQueued|flagInUrgent) == flagQueued {
			e.enqueue(i)
		}
	default:
		e.cancel(i)
		e.keys[i].target = w
		e.keys[i].flags = flagQueued
		e.moving++
		e.node(w).queued++
		e.enqueue(i)
	}
}

// avoidUnavailable makes key i avoid the members it would go to that are
// full or resting (while another member is active), as long as one member
// remains that it does not avoid. A key that avoids a resting member
// comes back to it when it is active again.
func (e *Engine) avoidUnavailable(i int32) {
	k := e.keys[i].key
	for {
		w := e.want(i)
		ex := e.overrides[k]
		if w == 0 || !e.unavailable(w) || len(ex)+len(e.refused[k])+1 >= len(e.members) {
			return
		}
		e.overrides[k] = append(ex, w)
		if !e.full(w) {
			l := e.limit(w)
			l.away = append(l.away, k)
		}
	}
}

// enqueue puts queued key i on its target's queue: the urgent one if its
// owner is gone.
func (e *Engine) enqueue(i int32) {
	t := e.keys[i].target
	ns := e.node(t)
	if o := e.keys[i].owner; o != 0 && !e.isMember(o) {
		ns.urgent.push(i)
		e.keys[i].flags |= flagInUrgent
	} else {
		ns.normal.push(i)
	}
	e.ready[t] = true
}

// cancel ends the move of key i, if any: a target that got the assign is
// told to drop the key.
func (e *Engine) cancel(i int32) {
	t := e.keys[i].target
	if t == 0 {
		return
	}
	if e.keys[i].flags&flagSent != 0 && e.isMember(t) {
		e.emit(Decision{Kind: Drop, Node: t, Key: e.keys[i].key})
	}
	e.endMove(i)
}

// endMove frees what key i's move holds on its target (a slot, or a place
// in its queue) and clears the move.
func (e *Engine) endMove(i int32) {
	t, flags := e.keys[i].target, e.keys[i].flags
	ns := e.node(t)
	switch {
	case flags&flagFailed != 0:
	case flags&flagSent != 0:
		ns.inFlight--
		e.ready[t] = true
	default:
		ns.queued--
	}
	e.keys[i].target, e.keys[i].flags = 0, 0
	e.moving--
}

// node returns the state of id, creating it.
func (e *Engine) node(id uint32) *nodeState {
	ns := e.nodes[id]
	if ns == nil {
		ns = &nodeState{}
		e.nodes[id] = ns
	}
	return ns
}

func (e *Engine) emit(d Decision) { e.out = append(e.out, d) }

// Confirm records that node holds a complete mirror of key. If node is the
// key's target, the move is done: node becomes the owner, its slot is
// freed, and the old owner, if still a member, is told to drop the key.
// Confirmations from other nodes change nothing.
func (e *Engine) Confirm(node uint32, key repokey.Key) {
	if i, ok := e.index.get(e.keys, key); ok && node != 0 && e.keys[i].target == node {
		e.complete(i)
	}
}

func (e *Engine) complete(i int32) {
	t, old := e.keys[i].target, e.keys[i].owner
	e.endMove(i)
	e.setOwner(i, t)
	if old != 0 && old != t && e.isMember(old) {
		e.emit(Decision{Kind: Drop, Node: old, Key: e.keys[i].key})
	}
}

// CloneFailed records that node could not clone key: its slot is freed at
// once for the next key in its queue, and the move stays with node, which
// retries the clone on its own schedule (its backoff) outside the pacing
// until it confirms. So upstreams that fail cannot hold every slot while a
// healthy repository waits. Repeated failures change nothing more.
func (e *Engine) CloneFailed(node uint32, key repokey.Key) {
	i, ok := e.index.get(e.keys, key)
	if !ok || node == 0 || e.keys[i].target != node || e.keys[i].flags&(flagSent|flagFailed) != flagSent {
		return
	}
	ns := e.node(node)
	ns.inFlight--
	e.ready[node] = true
	e.keys[i].flags |= flagFailed
}

// Hold reconciles what node holds on disk (the inventory of a node that
// connects, such as a restarted partial node) with the placement; call it
// after SetMembers has counted the node in. A key the node owns stays; a
// key it was to get completes its move without a clone; a key nobody
// serves (no owner, or an owner that is no longer a member) is adopted,
// then moves make-before-break if node is not its desired owner. Other
// keys, and keys the engine does not know, are dropped: feed the catalog
// before inventories. Before any members, every known key is adopted.
func (e *Engine) Hold(node uint32, keys ...repokey.Key) {
	if node == 0 {
		return
	}
	for _, k := range keys {
		i, ok := e.index.get(e.keys, k)
		switch {
		case !ok:
			e.emit(Decision{Kind: Drop, Node: node, Key: k})
		case e.keys[i].owner == node:
		case e.keys[i].target == node:
			e.complete(i)
		case !e.live(e.keys[i].owner) && (e.ring == nil || e.isMember(node)):
			e.setOwner(i, node)
			e.apply(i)
		default:
			e.emit(Decision{Kind: Drop, Node: node, Key: k})
		}
	}
}

// SetDisk records a node's disk usage. Above DiskHighWater the node takes
// no new clones, and the keys waiting for it that nobody serves go to other
// members; the node is expected to HandBack what it cannot hold. Below
// DiskLowWater the keys it handed back return to it, a few at a time, as
// its clone slots allow.
func (e *Engine) SetDisk(node uint32, used, total uint64) {
	if node == 0 || total == 0 {
		return
	}
	share := float64(used) / float64(total)
	ns := e.node(node)
	switch {
	case share > e.cfg.DiskHighWater:
		if ns.disk != diskFull {
			ns.disk, ns.back = diskFull, nil
			e.avoidQueued(node, ns)
		}
	case share < e.cfg.DiskLowWater:
		if ns.disk != diskRoom {
			ns.disk = diskRoom
			ns.back = e.avoiding(node)
			e.ready[node] = true
		}
	default:
		if ns.disk == diskFull {
			e.ready[node] = true
		}
		ns.disk, ns.back = diskOK, nil
	}
}

// avoidQueued re-places the keys waiting for node (full, or resting) that
// nobody serves.
func (e *Engine) avoidQueued(node uint32, ns *nodeState) {
	var waiting []int32
	for _, q := range []*queue{&ns.urgent, &ns.normal} {
		for _, i := range q.items[q.head:] {
			if e.keys[i].target == node && e.keys[i].flags&flagQueued != 0 && !e.live(e.keys[i].owner) {
				waiting = append(waiting, i)
			}
		}
	}
	for _, i := range waiting {
		if e.keys[i].target == node { // not done already through a duplicate entry
			e.apply(i)
		}
	}
}

// avoiding returns the keys that avoid node, sorted.
func (e *Engine) avoiding(node uint32) []repokey.Key {
	var keys []repokey.Key
	for k, ex := range e.overrides {
		if slices.Contains(ex, node) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// HandBack records that node cannot hold keys (its disk is full): each key
// it owns or was to get goes to the next member clockwise that is not full,
// make-before-break, and the key avoids node until node reports room again
// (SetDisk below DiskLowWater). Keys the node neither owns nor was to get
// are ignored.
func (e *Engine) HandBack(node uint32, keys ...repokey.Key) {
	if ns := e.nodes[node]; ns != nil && ns.disk == diskRoom {
		// It has no room after all: wait for its next report of room.
		ns.disk, ns.back = diskOK, nil
	}
	for _, k := range keys {
		i, ok := e.index.get(e.keys, k)
		if !ok || node == 0 || (e.keys[i].owner != node && e.keys[i].target != node) {
			continue
		}
		ex := e.overrides[k]
		if slices.Contains(ex, node) || len(ex)+len(e.refused[k])+1 >= len(e.members) {
			continue // already avoided, or the last member left to it
		}
		e.overrides[k] = append(ex, node)
		e.avoidUnavailable(i)
		e.apply(i)
	}
}

// Decisions returns the decisions taken since the last call, and releases
// the clones that the pacing allows: at most MaxInFlight assigns
// outstanding per node (fewer on a capped one: SetBandwidth), urgent keys
// first, nothing to a node whose disk is full or that is not a member, and
// nothing to a resting node while another member is active. Further
// assigns are released by later calls as Confirm and CloneFailed free
// slots. Call it after each batch of events.
func (e *Engine) Decisions() []Decision {
	for len(e.ready) > 0 {
		ids := slices.Sorted(maps.Keys(e.ready))
		clear(e.ready)
		awake := e.awake()
		for _, id := range ids {
			ns := e.nodes[id]
			if ns == nil || !e.isMember(id) || ns.disk == diskFull || awake && e.resting(id) {
				continue
			}
			if ns.disk == diskRoom {
				e.bringBack(id, ns, &ns.back)
			}
			if l := e.limits[id]; l != nil && !l.resting && len(l.away) > 0 {
				e.bringBack(id, ns, &l.away)
			}
			e.release(id, ns)
		}
	}
	out := e.out
	e.out = nil
	return out
}

// bringBack lets keys of back, which avoid node, return to it, as many as
// it has free slots for.
func (e *Engine) bringBack(node uint32, ns *nodeState, back *[]repokey.Key) {
	for len(*back) > 0 && ns.inFlight+ns.queued < e.slots(node) {
		k := (*back)[0]
		*back = (*back)[1:]
		i, ok := e.index.get(e.keys, k)
		ex := e.overrides[k]
		if !ok || !slices.Contains(ex, node) {
			continue
		}
		if ex = slices.DeleteFunc(ex, func(id uint32) bool { return id == node }); len(ex) == 0 {
			delete(e.overrides, k)
		} else {
			e.overrides[k] = ex
		}
		e.apply(i)
	}
	if len(*back) == 0 {
		*back = nil
	}
}

// release sends the assigns that node has slots for.
func (e *Engine) release(node uint32, ns *nodeState) {
	for ns.inFlight < e.slots(node) {
		i, ok := ns.urgent.pop()
		if !ok {
			if i, ok = ns.normal.pop(); !ok {
				return
			}
		}
		if int(i) >= len(e.keys) || e.keys[i].target != node || e.keys[i].flags&flagQueued == 0 {
			continue // stale
		}
		o := e.keys[i].owner
		e.keys[i].flags = flagSent
		ns.queued--
		ns.inFlight++
		e.emit(Decision{Kind: Assign, Node: node, Key: e.keys[i].key, Urgent: o != 0 && !e.isMember(o), From: o})
	}
}

// Owner returns the confirmed owner of key (0 if nobody has confirmed a
// mirror yet) and its target (0 unless a move is under way); false if the
// key is unknown. The owner may be a node that is no longer a member until
// the target confirms.
func (e *Engine) Owner(key repokey.Key) (owner, target uint32, ok bool) {
	i, ok := e.index.get(e.keys, key)
	if !ok {
		return 0, 0, false
	}
	return e.keys[i].owner, e.keys[i].target, true
}

// Digest identifies the key set whatever its order: the sum of the keys'
// ring.Hash. It changes when keys are added or removed.
func (e *Engine) Digest() uint64 { return e.digest }

// Load returns the number of keys each node owns (confirmed): counts kept
// as owners change, O(nodes).
func (e *Engine) Load() map[uint32]int { return maps.Clone(e.owned) }

// setOwner makes node (0: none) the confirmed owner of key i, and keeps
// the counts of Load true: every change of an owner goes through it.
func (e *Engine) setOwner(i int32, node uint32) {
	if o := e.keys[i].owner; o != 0 {
		e.owned[o]--
		if e.owned[o] == 0 {
			delete(e.owned, o)
		}
	}
	if node != 0 {
		e.owned[node]++
	}
	e.keys[i].owner = node
}

// InFlight returns, for each node with any, the assigns sent to it and not
// confirmed yet.
func (e *Engine) InFlight() map[uint32]int {
	out := map[uint32]int{}
	for id, ns := range e.nodes {
		if ns.inFlight > 0 {
			out[id] = ns.inFlight
		}
	}
	return out
}

// PendingMoves returns the number of keys with a target: clones queued,
// in flight, or waiting for a disk with room.
func (e *Engine) PendingMoves() int { return e.moving }
