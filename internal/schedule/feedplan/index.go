package feedplan

import "hash/maphash"

// keyIndex finds an entry by its key: an open-addressing table (linear
// probing) of entry numbers, 4 bytes a slot, at most 3/4 full. It takes
// 5 to 11 bytes a key where a Go map of string to int32 takes about 40,
// and holds no second copy of the key's header: the key is read from the
// entry.
type keyIndex struct {
	seed  maphash.Seed
	slots []int32 // entry number + 1; 0 is an empty slot
	n     int
}

func newKeyIndex() keyIndex {
	return keyIndex{seed: maphash.MakeSeed(), slots: make([]int32, 16)}
}

func (x *keyIndex) home(key string) int {
	return int(maphash.String(x.seed, key) & uint64(len(x.slots)-1))
}

// find returns the slot of key, or the empty slot where it would go, and
// its entry number (-1 if absent).
func (x *keyIndex) find(key string, entries []entry) (slot int, i int32) {
	mask := len(x.slots) - 1
	for s := x.home(key); ; s = (s + 1) & mask {
		v := x.slots[s]
		if v == 0 {
			return s, -1
		}
		if entries[v-1].key == key {
			return s, v - 1
		}
	}
}

// insert adds entry i, whose key is absent.
func (x *keyIndex) insert(i int32, entries []entry) {
	if 4*(x.n+1) > 3*len(x.slots) {
		old := x.slots
		x.slots = make([]int32, 2*len(old))
		for _, v := range old {
			if v != 0 {
				s, _ := x.find(entries[v-1].key, entries)
				x.slots[s] = v
			}
		}
	}
	s, _ := x.find(entries[i].key, entries)
	x.slots[s] = i + 1
	x.n++
}

// delete empties slot s, moving back the entries after it that probing
// would no longer reach.
func (x *keyIndex) delete(s int, entries []entry) {
	mask := len(x.slots) - 1
	for j := (s + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		h := x.home(entries[x.slots[j]-1].key)
		// The entry at j stays if its home is cyclically in (s, j].
		if s <= j && s < h && h <= j || s > j && (s < h || h <= j) {
			continue
		}
		x.slots[s] = x.slots[j]
		s = j
	}
	x.slots[s] = 0
	x.n--
}
