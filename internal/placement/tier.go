package placement

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
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
// Placing is over every unit; it runs once per batch of changes, in
// Decisions. A Tier is not safe for concurrent use.

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

// Tier holds the replicas of every unit on the full tier. Create it with
// NewTier or RestoreTier.
type Tier struct {
	cfg     TierConfig
	units   map[string]*tierUnit
	members []ring.Member // by ID, weights > 0
	ring    *ring.Ring    // nil without members
	dirty   bool          // units or members changed since the last placing
	out     []Decision
}

// tierUnit is what the tier knows of a unit.
type tierUnit struct {
	weight int
	want   []uint32 // the desired replicas, in the order placed
	held   []uint32 // confirmed replicas that are members
	sent   []uint32 // members told to take it that have not confirmed
}

// NewTier returns a tier with no units and no members.
func NewTier(cfg TierConfig) *Tier {
	return &Tier{cfg: cfg.withDefaults(), units: map[string]*tierUnit{}}
}

// Replicas is the number of replicas the tier keeps of each unit.
func (t *Tier) Replicas() int { return t.cfg.Replicas }

// Units returns the names of the units, in no order.
func (t *Tier) Units() []string { return slices.Collect(maps.Keys(t.units)) }

// Members returns the members the tier places on, by ID.
func (t *Tier) Members() []ring.Member { return slices.Clone(t.members) }

// Len returns the number of units.
func (t *Tier) Len() int { return len(t.units) }

// SetUnit adds unit name with a weight (its bytes, or its number of
// repositories: whatever the members' weights are shares of), or changes
// its weight; a weight <= 0 removes it. A removed unit's holders are told
// nothing: the repositories' removal reaches the full nodes on its own.
func (t *Tier) SetUnit(name string, weight int) {
	u := t.units[name]
	switch {
	case name == "":
	case weight <= 0:
		if u != nil {
			delete(t.units, name)
			t.dirty = true
		}
	case u == nil:
		t.units[name] = &tierUnit{weight: weight}
		t.dirty = true
	case u.weight != weight:
		u.weight = weight
		t.dirty = true
	}
}

// SetMembers sets the members of the tier: the full nodes alive or within
// their grace, weighted by their disks (members with an ID of 0 or a
// weight <= 0 are left out; IDs must be distinct). A replica on a node no
// longer a member is lost: it no longer counts, and the unit gets a new
// one.
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
	t.members = ms
	t.ring = nil
	if len(ms) > 0 {
		t.ring = ring.New(ms, ring.Options{LoadFactor: t.cfg.LoadFactor, VnodesPerWeight: t.cfg.VnodesPerWeight})
	}
	for _, u := range t.units {
		u.held = slices.DeleteFunc(u.held, func(id uint32) bool { return !t.isMember(id) })
		u.sent = slices.DeleteFunc(u.sent, func(id uint32) bool { return !t.isMember(id) })
	}
	t.dirty = true
}

func (t *Tier) isMember(id uint32) bool {
	_, ok := slices.BinarySearchFunc(t.members, id, func(m ring.Member, id uint32) int { return cmp.Compare(m.ID, id) })
	return ok
}

// place computes every unit's desired replicas.
func (t *Tier) place() {
	t.dirty = false
	names := slices.Collect(maps.Keys(t.units))
	if t.ring == nil {
		for _, n := range names {
			t.units[n].want = nil
		}
		return
	}
	units := make([]ring.Unit, len(names))
	for i, n := range names {
		units[i] = ring.Unit{Name: n, Weight: t.units[n].weight}
	}
	out, k := t.ring.PlaceReplicas(units, t.cfg.Replicas)
	for i, n := range names {
		u := t.units[n]
		u.want = append(u.want[:0], out[i*k:(i+1)*k]...)
	}
}

// Confirm records that node holds a complete copy of unit name (its
// inventory, or a pull it made). A member that confirms is a replica,
// wanted or not: a wanted one may let an unwanted one drop the unit.
// Confirmations from nodes that are not members, of unknown units, and
// of replicas confirmed already change nothing. It reports whether it
// recorded a replica.
func (t *Tier) Confirm(node uint32, name string) bool {
	u := t.units[name]
	if u == nil || !t.isMember(node) || slices.Contains(u.held, node) {
		return false
	}
	u.held = append(u.held, node)
	u.sent = slices.DeleteFunc(u.sent, func(id uint32) bool { return id == node })
	if !t.dirty {
		t.settle(name, u)
	}
	return true
}

// settle moves unit name towards its desired replicas: an assign to each
// desired member that neither holds it nor was told to, a drop to a
// member told to that is no longer desired, and a drop to each undesired
// replica as long as enough confirmed replicas remain without it.
func (t *Tier) settle(name string, u *tierUnit) {
	var from uint32
	if len(u.held) > 0 {
		from = u.held[0]
	}
	for _, w := range u.want {
		if !slices.Contains(u.held, w) && !slices.Contains(u.sent, w) {
			u.sent = append(u.sent, w)
			t.out = append(t.out, Decision{Kind: Assign, Node: w, Key: name, Urgent: len(u.held) < len(u.want), From: from})
		}
	}
	u.sent = slices.DeleteFunc(u.sent, func(id uint32) bool {
		if slices.Contains(u.want, id) {
			return false
		}
		t.out = append(t.out, Decision{Kind: Drop, Node: id, Key: name})
		return true
	})
	for i := 0; i < len(u.held) && len(u.held) > len(u.want); {
		if h := u.held[i]; !slices.Contains(u.want, h) {
			t.out = append(t.out, Decision{Kind: Drop, Node: h, Key: name})
			u.held = slices.Delete(u.held, i, i+1)
			continue
		}
		i++
	}
}

// Decisions places the units again if they or the members changed, and
// returns the decisions taken since the last call. Call it after each
// batch of events.
func (t *Tier) Decisions() []Decision {
	if t.dirty {
		t.replace()
	}
	out := t.out
	t.out = nil
	return out
}

// replace places every unit and moves each towards its desired replicas.
func (t *Tier) replace() {
	t.place()
	for _, n := range slices.Sorted(maps.Keys(t.units)) {
		t.settle(n, t.units[n])
	}
}

// ReplicasOf returns the desired replicas of unit name as last placed (by
// Decisions), and those that confirmed a copy; false if the unit is
// unknown.
func (t *Tier) ReplicasOf(name string) (want, held []uint32, ok bool) {
	u := t.units[name]
	if u == nil {
		return nil, nil, false
	}
	return slices.Clone(u.want), slices.Clone(u.held), true
}

// Held returns, for each member, the number of units and the weight of the
// units it is to hold (desired replicas, as last placed).
func (t *Tier) Held() map[uint32][2]int {
	out := map[uint32][2]int{}
	for _, u := range t.units {
		for _, id := range u.want {
			c := out[id]
			out[id] = [2]int{c[0] + 1, c[1] + u.weight}
		}
	}
	return out
}

// tierMagic starts a tier snapshot; its last byte is the format version.
const tierMagic = "gftier\x01"

// Snapshot encodes what a restarted tier needs besides its units: the
// members it placed with, and the units whose confirmed replicas are not
// their desired ones (a move under way). A settled tier's snapshot is a
// few bytes per member, whatever the number of units.
func (t *Tier) Snapshot() []byte {
	if t.dirty {
		t.replace() // its decisions wait for the next Decisions
	}
	b := []byte(tierMagic)
	b = binary.AppendUvarint(b, uint64(len(t.members)))
	for _, m := range t.members {
		b = binary.AppendUvarint(b, uint64(m.ID))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Weight))
	}
	var moving []string
	for n, u := range t.units {
		if !sameSet(u.held, u.want) {
			moving = append(moving, n)
		}
	}
	slices.Sort(moving)
	b = binary.AppendUvarint(b, uint64(len(moving)))
	for _, n := range moving {
		u := t.units[n]
		b = appendString(b, n)
		b = binary.AppendUvarint(b, uint64(len(u.held)))
		for _, id := range u.held {
			b = binary.AppendUvarint(b, uint64(id))
		}
	}
	return b
}

func sameSet(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// RestoreTier rebuilds a tier from a Snapshot and its units (name ->
// weight): the members it had, and every unit's confirmed replicas (its
// desired ones unless the snapshot records others). Units recorded that
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
	for n, u := range t.units {
		if held, ok := recorded[n]; ok {
			u.held = slices.DeleteFunc(held, func(id uint32) bool { return !t.isMember(id) })
		} else {
			u.held = slices.Clone(u.want)
		}
	}
	// Moves under way are sent again, and new units placed, by the next
	// Decisions.
	t.dirty = true
	return t, nil
}
