// Package ring owns gitfleet's placement function: weighted consistent
// hashing of repository keys onto member IDs, and a bounded-load placement
// of a whole key set. It is pure and deterministic: the same members and
// keys give the same answer in every process and after every restart.
//
// It must not know about sessions, liveness, storage or time: the caller
// decides who the members are (see package membership) and what to do with
// an answer.
package ring

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Defaults of Options.
const (
	// DefaultVnodesPerWeight keeps the load of 100 equal members within
	// 10% of the mean without the load bound: a member's share of the
	// circle varies by about 1/sqrt(vnodes), so the largest of 100 shares
	// is some 2.5/sqrt(vnodes) above the mean (1000 vnodes measured up to
	// 1.13; 2000 kept under 1.09).
	DefaultVnodesPerWeight = 2000
	// DefaultLoadFactor lets a member hold up to 25% more than its share.
	DefaultLoadFactor = 1.25
	// MaxWeight caps a member's weight: weights are declared by nodes, and
	// each unit of weight costs VnodesPerWeight points.
	MaxWeight = 100
)

// Member is a participant of the ring: a node and its placement weight.
// It is the one member type of the fleet: package membership computes the
// members (its flap penalty applied to the weight), and package placement
// keeps its keys on them.
type Member struct {
	// ID is the node's ID; placement ignores a member with ID 0.
	ID uint32
	// Weight is the member's capacity relative to a standard node (1.0).
	// Members whose weight is not a number > 0 hold nothing; weights above
	// MaxWeight count as MaxWeight.
	Weight float64
}

// Options tune a Ring. The zero value means the defaults.
type Options struct {
	// VnodesPerWeight is the number of points a member of weight 1.0 has
	// on the circle (DefaultVnodesPerWeight if <= 0).
	VnodesPerWeight int
	// LoadFactor bounds Place: no member gets more than
	// ceil(LoadFactor * its weight share * number of keys) keys.
	// DefaultLoadFactor if <= 0; values in (0, 1) are taken as 1.
	LoadFactor float64
}

// Ring is an immutable weighted consistent-hash ring. It is safe for
// concurrent use.
type Ring struct {
	members []Member // by ID
	points  []uint64 // ascending
	owners  []uint32 // owners[i] indexes members; the owner of points[i]
	factor  float64

	// start[b] is the index of the first point whose top bits are >= b, so
	// that a lookup searches only the points of one bucket: a plain binary
	// search over 200,000 points misses the cache at nearly every step.
	start []uint32
	shift uint // a point's bucket is point >> shift
}

// Hash is the position of a key on the circle.
func Hash(key string) uint64 { return xxhash.Sum64String(key) }

// vnodeHash is the position of a member's i-th virtual node: the hash of
// ID (4 bytes, big-endian) || 0x00 || i (4 bytes, big-endian).
func vnodeHash(id uint32, i uint32) uint64 {
	var b [9]byte
	binary.BigEndian.PutUint32(b[0:4], id)
	binary.BigEndian.PutUint32(b[5:9], i)
	return xxhash.Sum64(b[:])
}

// New builds a ring. The order of members does not matter. Each member gets
// round(Weight * VnodesPerWeight) points (at least one); when two points
// collide, the member with the smaller ID comes first and owns the keys up
// to it. New panics if two members with weights > 0 have the same ID.
func New(members []Member, opts Options) *Ring {
	if opts.VnodesPerWeight <= 0 {
		opts.VnodesPerWeight = DefaultVnodesPerWeight
	}
	switch {
	case opts.LoadFactor <= 0:
		opts.LoadFactor = DefaultLoadFactor
	case opts.LoadFactor < 1:
		opts.LoadFactor = 1
	}

	ms := make([]Member, 0, len(members))
	for _, m := range members {
		if m.Weight > 0 {
			m.Weight = min(m.Weight, MaxWeight)
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(ms); i++ {
		if ms[i].ID == ms[i-1].ID {
			panic(fmt.Sprintf("ring: duplicate member ID %d", ms[i].ID))
		}
	}

	type vnode struct {
		point uint64
		owner uint32
	}
	counts := make([]int, len(ms))
	total := 0
	for i, m := range ms {
		counts[i] = max(1, int(math.Round(m.Weight*float64(opts.VnodesPerWeight))))
		total += counts[i]
	}
	vnodes := make([]vnode, 0, total)
	for idx, m := range ms {
		for i := range counts[idx] {
			vnodes = append(vnodes, vnode{vnodeHash(m.ID, uint32(i)), uint32(idx)})
		}
	}
	// Member indexes follow ID order, so ties break by ID.
	slices.SortFunc(vnodes, func(a, b vnode) int {
		if c := cmp.Compare(a.point, b.point); c != 0 {
			return c
		}
		return cmp.Compare(a.owner, b.owner)
	})

	r := &Ring{
		members: ms,
		points:  make([]uint64, len(vnodes)),
		owners:  make([]uint32, len(vnodes)),
		factor:  opts.LoadFactor,
	}
	for i, v := range vnodes {
		r.points[i] = v.point
		r.owners[i] = v.owner
	}
	r.index()
	return r
}

// index fills start with about one bucket per two points.
func (r *Ring) index() {
	bits := uint(0)
	for 1<<bits < len(r.points)/2 {
		bits++
	}
	r.shift = 64 - bits
	r.start = make([]uint32, 1<<bits+1)
	i := 0
	for b := range 1 << bits {
		for i < len(r.points) && r.points[i]>>r.shift < uint64(b) {
			i++
		}
		r.start[b] = uint32(i)
	}
	r.start[1<<bits] = uint32(len(r.points))
}

// Members returns the members that hold keys, by ID, with their weights
// as the ring counts them.
func (r *Ring) Members() []Member { return slices.Clone(r.members) }

// successor is the index of the first point at or after h, wrapping to 0.
func (r *Ring) successor(h uint64) int {
	b := h >> r.shift
	lo, hi := int(r.start[b]), int(r.start[b+1])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.points[m] < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(r.points) {
		return 0
	}
	return lo
}

// Lookup returns the owner of key by plain consistent hashing: the member
// of the first point clockwise from Hash(key). It reports false if the ring
// has no members.
func (r *Ring) Lookup(key string) (uint32, bool) {
	if len(r.points) == 0 {
		return 0, false
	}
	return r.members[r.owners[r.successor(Hash(key))]].ID, true
}

// LookupN returns up to n distinct members in the order met clockwise from
// Hash(key): the owner first, then its successors (fallbacks). It returns
// fewer than n only if the ring has fewer members.
func (r *Ring) LookupN(key string, n int) []uint32 {
	n = min(n, len(r.members))
	if n <= 0 {
		return nil
	}
	out := make([]uint32, 0, n)
	seen := make([]bool, len(r.members))
	for i, j := 0, r.successor(Hash(key)); len(out) < n && i < len(r.points); i++ {
		if o := r.owners[j]; !seen[o] {
			seen[o] = true
			out = append(out, r.members[o].ID)
		}
		if j++; j == len(r.points) {
			j = 0
		}
	}
	return out
}

// keyRef is a key's hash and its index in the caller's slice.
type keyRef struct {
	hash  uint64
	index uint32
}

// Place assigns every key an owner under the load bound and returns the
// owners in the order of keys, or nil if the ring has no members.
//
// The algorithm: member m may hold at most
// ceil(LoadFactor * m.Weight / total weight * len(keys)) keys. Keys are
// taken in ascending order of (Hash(key), key), so the result does not
// depend on the order of the input. Each key goes to its Lookup owner if
// that member has room; otherwise to the next distinct member clockwise
// from the key's position that has room. The capacities add up to at least
// len(keys), so every key finds a member. When no member exceeds its bound
// under plain hashing, Place gives the same answer as Lookup.
func (r *Ring) Place(keys []string) []uint32 {
	refs := make([]keyRef, len(keys))
	for i, k := range keys {
		refs[i] = keyRef{Hash(k), uint32(i)}
	}
	slices.SortFunc(refs, func(a, b keyRef) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return strings.Compare(keys[a.index], keys[b.index])
	})
	return r.place(refs)
}

// PlaceHashes is Place for keys given by their Hash. Keys with equal hashes
// are interchangeable to it: if two of them may get different owners, only
// Place, which breaks the tie by key, is independent of the input order.
func (r *Ring) PlaceHashes(hashes []uint64) []uint32 {
	refs := make([]keyRef, len(hashes))
	for i, h := range hashes {
		refs[i] = keyRef{h, uint32(i)}
	}
	slices.SortFunc(refs, func(a, b keyRef) int { return cmp.Compare(a.hash, b.hash) })
	return r.place(refs)
}

// place assigns keys sorted by hash. As keys and points are both sorted,
// the Lookup owner of each key is found by walking the points once.
func (r *Ring) place(sorted []keyRef) []uint32 {
	if len(r.points) == 0 {
		return nil
	}
	var total float64
	for _, m := range r.members {
		total += m.Weight
	}
	n := float64(len(sorted))
	room := make([]int, len(r.members))
	for i, m := range r.members {
		room[i] = int(math.Ceil(r.factor * m.Weight / total * n))
	}

	out := make([]uint32, len(sorted))
	p := 0
	for _, k := range sorted {
		for p < len(r.points) && r.points[p] < k.hash {
			p++
		}
		j := p
		if j == len(r.points) {
			j = 0
		}
		for room[r.owners[j]] == 0 {
			if j++; j == len(r.points) {
				j = 0
			}
		}
		o := r.owners[j]
		room[o]--
		out[k.index] = r.members[o].ID
	}
	return out
}

// Unit is a set of keys placed as one, on one member: Name places it on the
// circle (as a key would be), and it counts Weight keys against the load
// bound. A fork network is one.
type Unit struct {
	Name   string
	Weight int
}

// PlaceUnits is Place for units: every unit gets one owner, and a member
// may hold at most ceil(LoadFactor * its weight share * the total weight)
// keys. Units are taken in ascending order of (Hash(Name), Name); each goes
// to the first member clockwise from its position that has room for its
// whole weight, or, if no member has, to the one with the most room (the
// first met on a tie): a unit too heavy for any member still places. With
// every weight 1 it gives what Place gives for the names. displaced reports
// whether any unit went elsewhere than its Lookup owner.
func (r *Ring) PlaceUnits(units []Unit) (owners []uint32, displaced bool) {
	if len(r.points) == 0 {
		return nil, false
	}
	refs, n := unitOrder(units)
	room := r.ReplicaBounds(1, n)
	owners = make([]uint32, len(units))
	p := 0
	for _, k := range refs {
		for p < len(r.points) && r.points[p] < k.hash {
			p++
		}
		j := p
		if j == len(r.points) {
			j = 0
		}
		w := max(units[k.index].Weight, 0)
		first, chosen, most := r.owners[j], -1, -1
		for range len(r.points) {
			o := int(r.owners[j])
			if room[o] >= w {
				chosen = o
				break
			}
			if most < 0 || room[o] > room[most] {
				most = o
			}
			if j++; j == len(r.points) {
				j = 0
			}
		}
		if chosen < 0 {
			chosen = most
		}
		if uint32(chosen) != first {
			displaced = true
		}
		room[chosen] -= w
		owners[k.index] = r.members[chosen].ID
	}
	return owners, displaced
}

// PlaceReplicas places every unit on n distinct members (all members if
// there are fewer), under a load bound in weight: member m may hold at
// most ceil(LoadFactor * m.Weight / total weight * n * the total weight
// of the units) (ReplicaBounds). Weighted by bytes, the bound balances
// bytes, which counting keys does not when sizes are heavy-tailed (see
// package placement/sim). The result is flat: the members of unit i, in
// the order chosen, are out[i*k:(i+1)*k], where k is n or the number of
// members if that is smaller (k = 0 without members).
//
// A unit's plain members are its first k distinct members clockwise
// (LookupN). The units are placed in three passes, so that the bound
// displaces as few units as it can, and the same ones whatever changed
// elsewhere on the ring:
//
//  1. The light units (each weighing at most a hundredth of a member's
//     mean share) reserve their weight on their plain members.
//  2. The heavy units, heaviest first (ties by (Hash(Name), Name)), each go
//     to the first k distinct members clockwise that have room for its
//     whole weight under the bound beside the reserve there, and, if
//     fewer than k have, to those with the most such room among the
//     others.
//  3. The light units, heaviest first (ties likewise), each take back its
//     reserve and go the same way.
//
// Where the heavy units fit beside the reserve, every light unit goes to
// its plain members: a member lost or joined moves the light units it
// held or takes and no others, and the bound moves only heavy units, of
// which there are at most a hundred per member of weight 1. A member that
// a heavy unit put over its room anyway sheds its heaviest light units
// (the fewest units for the weight) to members with room beyond their
// own reserve, which shed none of theirs.
//
// When no member holds more than its bound with each unit on its plain
// members, every unit goes there: the bound then changes nothing, and a
// unit's members do not depend on the others.
func (r *Ring) PlaceReplicas(units []Unit, n int) (out []uint32, k int) {
	out, k, _ = r.PlaceReplicasDisplaced(units, n)
	return out, k
}

// heavyShare is the fraction of a member's mean share above which a unit
// is heavy to PlaceReplicas: placed before the others, by weight.
const heavyShare = 100

// PlaceReplicasDisplaced is PlaceReplicas, and reports whether the bound
// sent any unit elsewhere than its first k distinct members clockwise.
// When it did not, every unit's members are LookupN(unit.Name, k).
func (r *Ring) PlaceReplicasDisplaced(units []Unit, n int) (out []uint32, k int, displaced bool) {
	k = min(n, len(r.members))
	if k <= 0 || len(r.points) == 0 {
		return nil, 0, false
	}
	refs, sum := unitOrder(units)
	room := r.ReplicaBounds(k, sum)
	weight := func(ref keyRef) int { return max(units[ref.index].Weight, 0) }
	heavyOver := sum * float64(k) / float64(len(r.members)) / heavyShare
	var heavy, light []keyRef
	for _, ref := range refs {
		if float64(weight(ref)) > heavyOver {
			heavy = append(heavy, ref)
		} else {
			light = append(light, ref)
		}
	}
	// Stable sorts keep the (Hash(Name), Name) order among equal weights.
	slices.SortStableFunc(heavy, func(a, b keyRef) int { return cmp.Compare(weight(b), weight(a)) })
	slices.SortStableFunc(light, func(a, b keyRef) int { return cmp.Compare(weight(b), weight(a)) })

	out = make([]uint32, len(units)*k)
	chosen := make([]int, 0, k)
	seen := make([]bool, len(r.members))
	// pick fills chosen with the first k distinct members clockwise from
	// h whose free(o) is at least w, then with the others of most free;
	// it reports whether it went past a plain member.
	pick := func(h uint64, w int, free func(o int) int) (past bool) {
		chosen = chosen[:0]
		met := 0
		j := r.successor(h)
		for steps := 0; len(chosen) < k && met < len(r.members) && steps < len(r.points); steps++ {
			if o := int(r.owners[j]); !seen[o] {
				seen[o] = true
				met++
				if free(o) >= w {
					chosen = append(chosen, o)
				} else {
					past = true
				}
			}
			if j++; j == len(r.points) {
				j = 0
			}
		}
		clear(seen)
		for _, o := range chosen {
			seen[o] = true
		}
		for len(chosen) < k {
			past = true
			most := -1
			for o := range r.members {
				if !seen[o] && (most < 0 || free(o) > free(most)) {
					most = o
				}
			}
			seen[most] = true
			chosen = append(chosen, most)
		}
		clear(seen)
		return past
	}
	// reserved is the weight of the light units still to place on their
	// plain members, which plain keeps (k a light unit, in its order).
	always := func(int) int { return math.MaxInt }
	reserved := make([]int, len(r.members))
	plain := make([]int32, 0, len(light)*k)
	for _, ref := range light {
		pick(ref.hash, 0, always)
		for _, o := range chosen {
			reserved[o] += weight(ref)
			plain = append(plain, int32(o))
		}
	}
	free := func(o int) int { return room[o] - reserved[o] }
	put := func(ref keyRef) {
		for i, o := range chosen {
			room[o] -= weight(ref)
			out[int(ref.index)*k+i] = r.members[o].ID
		}
	}
	for _, ref := range heavy {
		if pick(ref.hash, weight(ref), free) {
			displaced = true
		}
		put(ref)
	}
	for i, ref := range light {
		w, ps := weight(ref), plain[i*k:(i+1)*k]
		chosen = chosen[:0]
		for _, o := range ps {
			reserved[o] -= w // its own reserve is room for it
			chosen = append(chosen, int(o))
		}
		for _, o := range ps {
			if free(int(o)) < w {
				if pick(ref.hash, w, free) {
					displaced = true
				}
				break
			}
		}
		put(ref)
	}
	return out, k, displaced
}

// unitOrder returns the units' positions on the ring in the order
// PlaceUnits and PlaceReplicas take them, ascending (Hash(Name), Name),
// and the units' total weight (negative weights count as 0).
func unitOrder(units []Unit) (refs []keyRef, sum float64) {
	refs = make([]keyRef, len(units))
	for i, u := range units {
		refs[i] = keyRef{Hash(u.Name), uint32(i)}
		sum += float64(max(u.Weight, 0))
	}
	slices.SortFunc(refs, func(a, b keyRef) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return strings.Compare(units[a.index].Name, units[b.index].Name)
	})
	return refs, sum
}

// ReplicaBounds returns the most weight PlaceReplicas lets each member (in
// the order of Members) hold when it places units of total weight sum on
// k members each: ceil(LoadFactor * m.Weight / total weight * k * sum).
// An incremental placement compares its loads with these, computed the
// same way to the last bit.
func (r *Ring) ReplicaBounds(k int, sum float64) []int {
	var total float64
	for _, m := range r.members {
		total += m.Weight
	}
	room := make([]int, len(r.members))
	for i, m := range r.members {
		room[i] = int(math.Ceil(r.factor * m.Weight / total * float64(k) * sum))
	}
	return room
}
