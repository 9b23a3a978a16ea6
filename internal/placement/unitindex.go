package placement

import "hash/maphash"

// unitIndex maps each unit's name to its index in Tier.names. It is an
// open-addressing table with linear probing whose slots are the index plus
// one (0 marks an empty slot), at most three quarters used: 4 to 8 bytes a
// unit, where a map[string]int32 takes some 50. A lookup compares the
// names of the slots it probes (two or three as a rule). The hash is
// seeded per index, so names chosen to collide cannot degrade it for every
// coordinator.
type unitIndex struct {
	seed  maphash.Seed
	slots []uint32
	n     int
}

func newUnitIndex() unitIndex {
	return unitIndex{seed: maphash.MakeSeed(), slots: make([]uint32, 16)}
}

func (x *unitIndex) home(name string) uint64 {
	return maphash.String(x.seed, name) & uint64(len(x.slots)-1)
}

// find returns the slot of name (found) or the empty slot that ends its
// probe sequence.
func (x *unitIndex) find(names []string, name string) (pos uint64, found bool) {
	mask := uint64(len(x.slots) - 1)
	for p := x.home(name); ; p = (p + 1) & mask {
		s := x.slots[p]
		if s == 0 {
			return p, false
		}
		if names[s-1] == name {
			return p, true
		}
	}
}

// get returns the index of name.
func (x *unitIndex) get(names []string, name string) (int32, bool) {
	p, ok := x.find(names, name)
	if !ok {
		return 0, false
	}
	return int32(x.slots[p] - 1), true
}

// insert records that name, not in the index, is at i; names[i] must be
// name already.
func (x *unitIndex) insert(names []string, name string, i int32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.resize(names, len(x.slots)*2)
	}
	p, _ := x.find(names, name)
	x.slots[p] = uint32(i) + 1
	x.n++
}

// move records that name, in the index, is now at i.
func (x *unitIndex) move(names []string, name string, i int32) {
	if p, ok := x.find(names, name); ok {
		x.slots[p] = uint32(i) + 1
	}
}

// remove takes name out of the index, shifting back the slots after it
// that would otherwise be cut off from their home.
func (x *unitIndex) remove(names []string, name string) {
	p, ok := x.find(names, name)
	if !ok {
		return
	}
	x.n--
	mask := uint64(len(x.slots) - 1)
	x.slots[p] = 0
	for q := (p + 1) & mask; x.slots[q] != 0; q = (q + 1) & mask {
		h := x.home(names[x.slots[q]-1])
		// The entry at q may move to the hole at p unless its home lies
		// cyclically in (p, q].
		if (p < q && (h <= p || h > q)) || (p > q && h <= p && h > q) {
			x.slots[p], x.slots[q] = x.slots[q], 0
			p = q
		}
	}
}

// resize moves the entries to a table of size slots, a power of two.
func (x *unitIndex) resize(names []string, size int) {
	old := x.slots
	x.slots = make([]uint32, size)
	mask := uint64(size - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		p := x.home(names[s-1])
		for x.slots[p] != 0 {
			p = (p + 1) & mask
		}
		x.slots[p] = s
	}
}
