package placement

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gitfleet/gitfleet/internal/ring"
)

// The full tier: full nodes share the repositories, each unit (a fork
// network, or a standalone repository) held by Replicas of them. A Tier
// places units on the full nodes by the same ring as the Engine places keys
// on the owners, separately from it: the first Replicas distinct members
// clockwise from the unit, under a load bound in the units' weights
// (ring.PlaceReplicas), so that a unit weighted by its bytes balances
// bytes. With fewer members than Replicas, every member holds every unit.
//
// Each replica moves make-before-break: a member that is to hold a unit is
// told to (Assign) and confirms (Confirm); a replica that is no longer
// wanted is told to drop the unit (Drop) only once the unit has as many
// confirmed replicas without it as it should have. A member gone past its
// grace (SetMembers without it) no longer counts as a replica: the unit's
// new replica is urgent and, when a replica survives, copies from it
// (Decision.From).
//
// Like the Engine it is pure: no I/O, no clock, no goroutine; and the
// desired replicas are a function of the members and the units alone, so a
// tier restored from its Snapshot with the same members moves nothing.
//
// Its cost follows the Engine's rule. SetMembers places every unit again
// (once, at the next Decisions). SetUnit costs time in proportion to the
// units it changes: as long as no member holds more than its load bound
// with every unit on its first Replicas distinct members clockwise (its
// plain replicas, ring.LookupN), the bound changes nothing, each unit's
// replicas are its plain ones, and a unit added or removed leaves the
// others where they are. Only a change made while the bound displaced a
// unit, or one that puts a member over its bound, places every unit again
// (with the same result: placing never depends on the order of changes).
//
// With no more members than Replicas (one or two full nodes, `gitfleet up`)
// every member holds every unit and the tier does no per-unit work: it
// places nothing and decides nothing, and Where answers for any unit, known
// or not, with the members. When a member joins past Replicas, every unit
// is taken to be held by the members that were there: in that mode each
// of them holds everything.
//
// Memory: a unit is its name, its weight and three set IDs (desired,
// confirmed, told to take it), the sets interned once in a table, so that
// a million units on twenty members share a few hundred sets.
// BenchmarkTierMillion reports the bytes a unit. A Tier is not safe for
// concurrent use.

// Defaults of TierConfig.
const (
	DefaultReplicas = 2
	// DefaultTierLoadFactor bounds a full node to 10% above its share of
	// the weight: the figure the tier is held to (docs/benchmarks.md).
	DefaultTierLoadFactor = 1.1
)

// TierConfig tunes a Tier. The zero value means the defaults.
type TierConfig struct {
	// Replicas is the number of members that hold each unit
	// (DefaultReplicas if <= 0).
	Replicas int
	// LoadFactor bounds a member's weight of units to LoadFactor times
	// its share (DefaultTierLoadFactor if <= 0).
	LoadFactor float64
	// VnodesPerWeight is the number of ring points of a member of weight
	// 1.0 (ring.DefaultVnodesPerWeight if <= 0).
	VnodesPerWeight int
}

func (c TierConfig) withDefaults() TierConfig {
	if c.Replicas <= 0 {
		c.Replicas = DefaultReplicas
	}
	if c.LoadFactor <= 0 {
		c.LoadFactor = DefaultTierLoadFactor
	}
	return c
}

// TierDecision is an order for one full node about one unit: a Decision
// whose subject is a unit's name (a fork network's, or a standalone
// repository's key as it is written), not a key.
type TierDecision struct {
	Kind Kind
	Node uint32
	Unit string
	// Urgent (assign only): the unit has fewer confirmed replicas than it
	// should.
	Urgent bool
	// From (assign only) is a confirmed replica to copy from, 0 if none.
	From uint32
}

// Tier holds the replicas of every unit on the full tier. Create it with
// NewTier or RestoreTier.
type Tier struct {
	cfg TierConfig

	// The units, by index; removing one moves the last into its hole.
	index   unitIndex
	names   []string
	weights []int
	want    []uint32 // set IDs: the desired replicas, in the order placed
	held    []uint32 // set IDs: confirmed replicas that are members
	sent    []uint32 // set IDs: members told to take it, not confirmed
	sets    setTable
	sum     int // the units' total weight

	members []ring.Member // by ID, weights > 0
	ring    *ring.Ring    // nil without members
	k       int           // replicas a unit has: min(Replicas, members)

	// load is the weight each member (by index in members) is to hold;
	// it is kept only while plain.
	load []int
	// plain: every unit's desired replicas are its plain ones and load is
	// up to date, so units can be placed one at a time.
	plain bool
	dirty bool     // every unit must be placed again
	check bool     // units changed since the load was last held to the bound
	touch []string // units to move towards their replicas at Decisions
	out   []TierDecision
	// placings counts the times every unit was placed (the tests check
	// that diffs do not).
	placings int
}

// NewTier returns a tier with no units and no members.
func NewTier(cfg TierConfig) *Tier {
	return &Tier{cfg: cfg.withDefaults(), index: newUnitIndex(), sets: newSetTable()}
}

// Replicas is the number of replicas the tier keeps of each unit.
func (t *Tier) Replicas() int { return t.cfg.Replicas }

// Everyone reports whether every member holds every unit: there are no
// more members than Replicas. The tier then keeps nothing per unit that
// its caller needs: Where answers for any unit.
func (t *Tier) Everyone() bool { return len(t.members) <= t.cfg.Replicas }

// Units returns the names of the units, in no order.
func (t *Tier) Units() []string { return slices.Clone(t.names) }

// Members returns the members the tier places on, by ID.
func (t *Tier) Members() []ring.Member { return slices.Clone(t.members) }

// Len returns the number of units.
func (t *Tier) Len() int { return len(t.names) }

// Weight returns the units' total weight.
func (t *Tier) Weight() int { return t.sum }

// WeightOf returns unit name's weight, 0 if the tier does not have it.
func (t *Tier) WeightOf(name string) int {
	if i, ok := t.index.get(t.names, name); ok {
		return t.weights[i]
	}
	return 0
}

// incremental reports whether a unit can be placed alone.
func (t *Tier) incremental() bool { return t.plain && !t.dirty && !t.Everyone() }

// SetUnit adds unit name with a weight (its bytes, or its number of
// repositories: whatever the members' weights are shares of), or changes
// its weight; a weight <= 0 removes it. A removed unit's holders are told
// nothing: the repositories' removal reaches the full nodes on its own.
// It costs time in proportion to the one unit, unless the load bound
// makes the next Decisions place every unit again (see above).
func (t *Tier) SetUnit(name string, weight int) {
	if name == "" {
		return
	}
	i, ok := t.index.get(t.names, name)
	switch {
	case weight <= 0:
		if ok {
			t.unplace(i)
			t.remove(i)
		}
	case !ok:
		i = int32(len(t.names))
		t.names = append(t.names, name)
		t.index.insert(t.names, name, i)
		t.weights = append(t.weights, weight)
		t.want = append(t.want, 0)
		t.held = append(t.held, 0)
		t.sent = append(t.sent, 0)
		t.sum += weight
		t.placeOne(i)
	case t.weights[i] != weight:
		t.unplace(i)
		t.weights[i] = weight
		t.sum += weight
		t.placeOne(i)
	}
}

// placeOne places unit i alone, on its plain replicas, if the tier can;
// otherwise every unit is placed again at the next Decisions. Unit i's
// weight is counted in sum.
func (t *Tier) placeOne(i int32) {
	switch {
	case t.ring == nil || t.Everyone():
	case !t.incremental():
		t.dirty = true
	default:
		want := t.ring.LookupN(t.names[i], t.k)
		t.want[i] = t.sets.id(want)
		for _, id := range want {
			t.load[t.memberIndex(id)] += t.weights[i]
		}
		t.check = true
		t.touch = append(t.touch, t.names[i])
	}
}

// unplace takes unit i's weight out of sum and, while plain, of the load
// of its replicas.
func (t *Tier) unplace(i int32) {
	w := t.weights[i]
	t.sum -= w
	if t.incremental() {
		for _, id := range t.sets.get(t.want[i]) {
			t.load[t.memberIndex(id)] -= w
		}
		t.check = true
	} else if t.ring != nil && !t.Everyone() {
		t.dirty = true
	}
}

// remove deletes unit i, moving the last unit into its place.
func (t *Tier) remove(i int32) {
	last := int32(len(t.names) - 1)
	t.index.remove(t.names, t.names[i])
	if i != last {
		t.index.move(t.names, t.names[last], i)
		t.names[i], t.weights[i] = t.names[last], t.weights[last]
		t.want[i], t.held[i], t.sent[i] = t.want[last], t.held[last], t.sent[last]
	}
	t.names[last] = ""
	t.names, t.weights = t.names[:last], t.weights[:last]
	t.want, t.held, t.sent = t.want[:last], t.held[:last], t.sent[:last]
}

// SetMembers sets the members of the tier: the full nodes alive or within
// their grace, weighted by their disks (members with an ID of 0 or a
// weight <= 0 are left out; IDs must be distinct). A replica on a node no
// longer a member is lost: it no longer counts, and the unit gets a new
// one. Every unit is placed again at the next Decisions.
func (t *Tier) SetMembers(members []ring.Member) {
	ms := make([]ring.Member, 0, len(members))
	for _, m := range members {
		if m.ID != 0 && m.Weight > 0 {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b ring.Member) int { return cmp.Compare(a.ID, b.ID) })
	if slices.Equal(ms, t.members) {
		return
	}
	before, everyone := t.members, t.Everyone()
	t.members = ms
	t.ring = nil
	if len(ms) > 0 {
		t.ring = ring.New(ms, ring.Options{LoadFactor: t.cfg.LoadFactor, VnodesPerWeight: t.cfg.VnodesPerWeight})
	}
	t.k = min(t.cfg.Replicas, len(ms))
	t.load = make([]int, len(ms))
	t.plain = false

	// Each set becomes the set of the members it holds (and, leaving the
	// mode where every member holds everything, the members there were);
	// a unit's sets are rewritten through a table of the sets in use.
	var stayed []uint32
	if everyone && !t.Everyone() {
		for _, m := range before {
			if t.isMember(m.ID) {
				stayed = append(stayed, m.ID)
			}
		}
	}
	old := t.sets
	t.sets = newSetTable()
	memo := map[uint32]uint32{}
	remap := func(id uint32, add []uint32) uint32 {
		if nid, ok := memo[id]; ok {
			return nid
		}
		var s []uint32
		for _, x := range old.get(id) {
			if t.isMember(x) {
				s = append(s, x)
			}
		}
		for _, x := range add {
			if !slices.Contains(s, x) {
				s = append(s, x)
			}
		}
		slices.Sort(s)
		nid := t.sets.id(s)
		memo[id] = nid
		return nid
	}
	for i := range t.held {
		t.held[i] = remap(t.held[i], stayed)
	}
	clear(memo)
	for i := range t.sent {
		t.sent[i] = remap(t.sent[i], nil)
	}
	clear(t.want) // placed again, from scratch, by the next Decisions
	t.touch = nil
	t.dirty = !t.Everyone()
}

func (t *Tier) isMember(id uint32) bool {
	_, ok := slices.BinarySearchFunc(t.members, id, func(m ring.Member, id uint32) int { return cmp.Compare(m.ID, id) })
	return ok
}

// memberIndex is the index of member id in members (and in load).
func (t *Tier) memberIndex(id uint32) int {
	j, _ := slices.BinarySearchFunc(t.members, id, func(m ring.Member, id uint32) int { return cmp.Compare(m.ID, id) })
	return j
}

// overBound reports whether a member holds more than its bound.
func (t *Tier) overBound() bool {
	for j, b := range t.ring.ReplicaBounds(t.k, float64(t.sum)) {
		if t.load[j] > b {
			return true
		}
	}
	return false
}

// place computes every unit's desired replicas from scratch, and the
// members' loads.
func (t *Tier) place() {
	t.dirty, t.check = false, false
	t.placings++
	clear(t.load)
	if t.ring == nil || t.Everyone() {
		clear(t.want)
		t.plain = false
		return
	}
	units := make([]ring.Unit, len(t.names))
	for i, n := range t.names {
		units[i] = ring.Unit{Name: n, Weight: t.weights[i]}
	}
	out, k, displaced := t.ring.PlaceReplicasDisplaced(units, t.cfg.Replicas)
	for i := range t.names {
		want := out[i*k : (i+1)*k]
		t.want[i] = t.sets.id(want)
		for _, id := range want {
			t.load[t.memberIndex(id)] += t.weights[i]
		}
	}
	t.plain = !displaced
}

// Confirm records that node holds a complete copy of unit name (its
// inventory, or a pull it made). A member that confirms is a replica,
// wanted or not: a wanted one may let an unwanted one drop the unit.
// Confirmations from nodes that are not members, of unknown units, and
// of replicas confirmed already change nothing. It reports whether it
// recorded a replica.
func (t *Tier) Confirm(node uint32, name string) bool {
	i, ok := t.index.get(t.names, name)
	if !ok || !t.isMember(node) {
		return false
	}
	held := t.sets.get(t.held[i])
	if slices.Contains(held, node) {
		return false
	}
	t.held[i] = t.sets.id(sortedWith(held, node))
	t.sent[i] = t.sets.id(without(t.sets.get(t.sent[i]), node))
	if !t.Everyone() {
		t.touch = append(t.touch, name)
	}
	return true
}

// sortedWith returns the sorted set s with x added, in a new slice.
func sortedWith(s []uint32, x uint32) []uint32 {
	out := append(make([]uint32, 0, len(s)+1), s...)
	j, _ := slices.BinarySearch(out, x)
	return slices.Insert(out, j, x)
}

// without returns s without x, in a new slice if x is in it.
func without(s []uint32, x uint32) []uint32 {
	if !slices.Contains(s, x) {
		return s
	}
	return slices.DeleteFunc(slices.Clone(s), func(y uint32) bool { return y == x })
}

// settle moves unit i towards its desired replicas: an assign to each
// desired member that neither holds it nor was told to, a drop to a
// member told to that is no longer desired, and a drop to each undesired
// replica as long as enough confirmed replicas remain without it.
func (t *Tier) settle(i int32) {
	want := t.sets.get(t.want[i])
	if t.sent[i] == 0 && t.held[i] == t.sets.sortedID(t.want[i]) {
		return
	}
	held := slices.Clone(t.sets.get(t.held[i]))
	sent := slices.Clone(t.sets.get(t.sent[i]))
	name := t.names[i]
	var from uint32
	if len(held) > 0 {
		from = held[0]
	}
	for _, w := range want {
		if !slices.Contains(held, w) && !slices.Contains(sent, w) {
			sent = append(sent, w)
			t.out = append(t.out, TierDecision{Kind: Assign, Node: w, Unit: name, Urgent: len(held) < len(want), From: from})
		}
	}
	sent = slices.DeleteFunc(sent, func(id uint32) bool {
		if slices.Contains(want, id) {
			return false
		}
		t.out = append(t.out, TierDecision{Kind: Drop, Node: id, Unit: name})
		return true
	})
	for j := 0; j < len(held) && len(held) > len(want); {
		if h := held[j]; !slices.Contains(want, h) {
			t.out = append(t.out, TierDecision{Kind: Drop, Node: h, Unit: name})
			held = slices.Delete(held, j, j+1)
			continue
		}
		j++
	}
	slices.Sort(sent)
	t.held[i], t.sent[i] = t.sets.id(held), t.sets.id(sent)
}

// Decisions places the units that changed (or, if the load bound or the
// members require it, every unit), and returns the decisions taken since
// the last call. Call it after each batch of events. With no more members
// than Replicas it decides nothing: every member holds everything.
func (t *Tier) Decisions() []TierDecision {
	t.update()
	out := t.out
	t.out = nil
	return out
}

// update brings the desired replicas up to date and moves the units that
// changed towards them.
func (t *Tier) update() {
	if t.check && t.incremental() && t.overBound() {
		t.dirty = true
	}
	t.check = false
	if t.dirty {
		t.place()
		for i := range t.names {
			t.settle(int32(i))
		}
	} else if !t.Everyone() {
		for _, n := range t.touch {
			if i, ok := t.index.get(t.names, n); ok {
				t.settle(i)
			}
		}
	}
	t.touch = nil // a batch of a million confirmations leaves no 16 MB behind
}

// ReplicasOf returns the desired replicas of unit name as last placed (by
// Decisions), and those that confirmed a copy; false if the unit is
// unknown.
func (t *Tier) ReplicasOf(name string) (want, held []uint32, ok bool) {
	i, ok := t.index.get(t.names, name)
	if !ok {
		return nil, nil, false
	}
	if t.Everyone() {
		return t.Where(name), slices.Clone(t.sets.get(t.held[i])), true
	}
	return slices.Clone(t.sets.get(t.want[i])), slices.Clone(t.sets.get(t.held[i])), true
}

// Where returns the desired replicas of unit name, as last placed: with no
// more members than Replicas, every member, in the order met clockwise
// from the unit, whether the tier knows the unit or not; otherwise those
// of a known unit, nil for an unknown one.
func (t *Tier) Where(name string) []uint32 {
	if t.Everyone() {
		if t.ring == nil {
			return nil
		}
		return t.ring.LookupN(name, t.k)
	}
	if i, ok := t.index.get(t.names, name); ok {
		return slices.Clone(t.sets.get(t.want[i]))
	}
	return nil
}

// Held returns, for each member, the number of units and the weight of the
// units it is to hold (desired replicas, as last placed).
func (t *Tier) Held() map[uint32][2]int {
	out := map[uint32][2]int{}
	if t.Everyone() {
		for _, m := range t.members {
			out[m.ID] = [2]int{len(t.names), t.sum}
		}
		return out
	}
	for i, w := range t.want {
		for _, id := range t.sets.get(w) {
			c := out[id]
			out[id] = [2]int{c[0] + 1, c[1] + t.weights[i]}
		}
	}
	return out
}

// TierLoad is a member's share of the tier: the units it is to hold
// (desired replicas, as last placed), their weight and their repositories,
// and the same of those it confirmed it holds.
type TierLoad struct {
	Units, Weight, Repos             int
	HeldUnits, HeldWeight, HeldRepos int
}

// Loads returns each member's TierLoad, and the units (and their weight)
// confirmed on fewer members than they should be on: Replicas, or every
// member when there are no more. It walks every unit; a unit counts as one
// repository.
func (t *Tier) Loads() (loads map[uint32]TierLoad, underUnits, underWeight int) {
	under := t.Short(func(uint32) bool { return true }, nil)
	return t.LoadsCounting(nil), under.Units, under.Weight
}

// LoadsCounting is each member's TierLoad with each unit's repositories
// counted by repos (a unit is one if repos is nil). The units short of
// replicas are Short's.
func (t *Tier) LoadsCounting(repos func(unit string) int) (loads map[uint32]TierLoad) {
	loads = make(map[uint32]TierLoad, len(t.members))
	count := func(i int) int {
		if repos == nil {
			return 1
		}
		return repos(t.names[i])
	}
	for i := range t.names {
		n, w := count(i), t.weights[i]
		if t.Everyone() {
			for _, m := range t.members {
				l := loads[m.ID]
				l.Units, l.Weight, l.Repos = l.Units+1, l.Weight+w, l.Repos+n
				loads[m.ID] = l
			}
		} else {
			for _, id := range t.sets.get(t.want[i]) {
				l := loads[id]
				l.Units, l.Weight, l.Repos = l.Units+1, l.Weight+w, l.Repos+n
				loads[id] = l
			}
		}
		for _, id := range t.sets.get(t.held[i]) {
			l := loads[id]
			l.HeldUnits, l.HeldWeight, l.HeldRepos = l.HeldUnits+1, l.HeldWeight+w, l.HeldRepos+n
			loads[id] = l
		}
	}
	if t.Everyone() {
		for _, m := range t.members {
			if _, ok := loads[m.ID]; !ok {
				loads[m.ID] = TierLoad{}
			}
		}
	}
	return loads
}

// Short counts the units with fewer healthy replicas than they should
// have (Replicas, or every member when there are no more): replicas
// confirmed on members that healthy accepts. Each unit's repositories are
// counted by repos (one if nil). It walks every unit; with no more members
// than Replicas (no confirmations kept) it counts nothing.
func (t *Tier) Short(healthy func(id uint32) bool, repos func(unit string) int) (short TierLoad) {
	if t.Everyone() {
		return TierLoad{}
	}
	need := min(t.cfg.Replicas, len(t.members))
	ok := map[uint32]int{} // set ID: its healthy members
	for i := range t.names {
		n, seen := ok[t.held[i]]
		if !seen {
			for _, id := range t.sets.get(t.held[i]) {
				if healthy(id) {
					n++
				}
			}
			ok[t.held[i]] = n
		}
		if n < need {
			short.Units, short.Weight = short.Units+1, short.Weight+t.weights[i]
			if repos == nil {
				short.Repos++
			} else {
				short.Repos += repos(t.names[i])
			}
		}
	}
	return short
}

// setTable interns the sets of members: a unit keeps the ID of each of its
// sets. ID 0 is the empty set. Sets are never removed; SetMembers starts a
// new table with the sets still in use.
type setTable struct {
	sets   [][]uint32
	sorted []uint32 // the ID of each set's sorted copy
	ids    map[string]uint32
	buf    []byte
}

func newSetTable() setTable {
	return setTable{sets: [][]uint32{nil}, sorted: []uint32{0}, ids: map[string]uint32{"": 0}}
}

// id returns the ID of set s (in its order), interning a copy if new.
func (st *setTable) id(s []uint32) uint32 {
	st.buf = st.buf[:0]
	for _, x := range s {
		st.buf = binary.LittleEndian.AppendUint32(st.buf, x)
	}
	if id, ok := st.ids[string(st.buf)]; ok {
		return id
	}
	id := uint32(len(st.sets))
	st.ids[string(st.buf)] = id
	st.sets = append(st.sets, slices.Clone(s))
	st.sorted = append(st.sorted, id)
	if !slices.IsSorted(s) {
		st.sorted[id] = st.id(slices.Sorted(slices.Values(s)))
	}
	return id
}

// get returns set id; the caller must not modify it.
func (st *setTable) get(id uint32) []uint32 { return st.sets[id] }

// sorted returns the ID of set id's sorted copy.
func (st *setTable) sortedID(id uint32) uint32 { return st.sorted[id] }

// tierMagic starts a tier snapshot; its last byte is the format version.
const tierMagic = "gftier\x01"

// Snapshot encodes what a restarted tier needs besides its units: the
// members it placed with, and the units whose confirmed replicas are not
// their desired ones (a move under way). A settled tier's snapshot is a
// few bytes per member, whatever the number of units.
func (t *Tier) Snapshot() []byte {
	t.update() // its decisions wait for the next Decisions
	b := []byte(tierMagic)
	b = binary.AppendUvarint(b, uint64(len(t.members)))
	for _, m := range t.members {
		b = binary.AppendUvarint(b, uint64(m.ID))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Weight))
	}
	var moving []int32
	if !t.Everyone() {
		for i := range t.names {
			if t.held[i] != t.sets.sortedID(t.want[i]) {
				moving = append(moving, int32(i))
			}
		}
	}
	slices.SortFunc(moving, func(a, b int32) int { return cmp.Compare(t.names[a], t.names[b]) })
	b = binary.AppendUvarint(b, uint64(len(moving)))
	for _, i := range moving {
		held := t.sets.get(t.held[i])
		b = appendString(b, t.names[i])
		b = binary.AppendUvarint(b, uint64(len(held)))
		for _, id := range held {
			b = binary.AppendUvarint(b, uint64(id))
		}
	}
	return b
}

// RestoreTier rebuilds a tier from a Snapshot and its units (name ->
// weight): the members it had, and every unit's confirmed replicas (its
// desired ones, or every member when there are no more than Replicas,
// unless the snapshot records others). Units recorded that
// are no longer given are skipped, and units given that were not there
// are placed as new ones. The assigns of moves under way are sent again
// by the next Decisions. It refuses a damaged snapshot.
func RestoreTier(cfg TierConfig, data []byte, units map[string]int) (*Tier, error) {
	if len(data) < len(tierMagic) || string(data[:len(tierMagic)]) != tierMagic {
		return nil, errors.New("placement: not a tier snapshot")
	}
	r := &reader{b: data[len(tierMagic):]}
	t := NewTier(cfg)
	var ms []ring.Member
	for range r.count() {
		id := r.id()
		w := math.Float64frombits(binary.LittleEndian.Uint64(r.bytes(8)))
		ms = append(ms, ring.Member{ID: id, Weight: w})
	}
	recorded := map[string][]uint32{}
	for range r.count() {
		n := r.str()
		held := make([]uint32, 0, 2)
		for range r.count() {
			held = append(held, r.id())
		}
		recorded[n] = held
	}
	if r.err != nil {
		return nil, fmt.Errorf("placement: tier snapshot: %w", r.err)
	}
	if len(r.b) > 0 {
		return nil, fmt.Errorf("placement: %d bytes after the tier snapshot", len(r.b))
	}
	for n, w := range units {
		t.SetUnit(n, w)
	}
	t.SetMembers(ms)
	t.place()
	all := t.sets.id(slices.Collect(func(yield func(uint32) bool) {
		for _, m := range t.members {
			if !yield(m.ID) {
				return
			}
		}
	}))
	for i, n := range t.names {
		switch held, ok := recorded[n]; {
		case ok:
			held = slices.DeleteFunc(held, func(id uint32) bool { return !t.isMember(id) })
			slices.Sort(held)
			t.held[i] = t.sets.id(slices.Compact(held))
			t.touch = append(t.touch, n) // a move under way: sent again
		case t.Everyone():
			t.held[i] = all
		default:
			t.held[i] = t.sets.sortedID(t.want[i])
		}
	}
	return t, nil
}
