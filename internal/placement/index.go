package placement

import (
	"hash/maphash"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// keyIndex maps each key to its index in Engine.keys. It is an
// open-addressing table with linear probing whose slots are single words:
// the top 32 bits of the key's hash, then the index plus one (0 marks an
// empty slot). At most three quarters of the slots are used, so a lookup
// reads one slot as a rule (its neighbours are in the same cache line),
// then the key's state, whose key it compares and which holds the owner
// and target that Owner returns: two cache lines. A map[string]int32 reads
// a control word and a slot, then the state; and it takes 24 bytes a slot
// against 8: 56 bytes per key at a million keys, against 17 here.
//
// A key's home slot is the top bits of its hash, which the slot keeps: the
// table grows without hashing a key again. The hash is seeded per index, so
// keys chosen to collide cannot degrade it for every coordinator; nothing
// outside the index depends on the seed.
type keyIndex struct {
	seed  maphash.Seed
	slots []uint64
	shift uint // a hash's home slot is hash >> shift; shift >= 32
	n     int
}

func newKeyIndex() keyIndex {
	x := keyIndex{seed: maphash.MakeSeed()}
	x.resize(16)
	return x
}

// reserve sizes the table for n keys.
func (x *keyIndex) reserve(n int) {
	size := len(x.slots)
	for size/4*3 < n {
		size *= 2
	}
	if size != len(x.slots) {
		x.resize(size)
	}
}

// resize moves the slots to a table of size slots, a power of two.
func (x *keyIndex) resize(size int) {
	old := x.slots
	x.slots = make([]uint64, size)
	bits := uint(0)
	for 1<<bits < size {
		bits++
	}
	x.shift = 64 - bits
	mask := uint64(size - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		p := s >> x.shift
		for x.slots[p] != 0 {
			p = (p + 1) & mask
		}
		x.slots[p] = s
	}
}

// find returns the slot of key k (found) or the empty slot that ends its
// probe sequence (not found), and k's hash.
func (x *keyIndex) find(keys []keyState, k repokey.Key) (pos uint64, h uint64, found bool) {
	h = maphash.String(x.seed, string(k))
	mask := uint64(len(x.slots) - 1)
	for p := h >> x.shift; ; p = (p + 1) & mask {
		s := x.slots[p]
		if s == 0 {
			return p, h, false
		}
		if s>>32 == h>>32 && keys[uint32(s)-1].key == k {
			return p, h, true
		}
	}
}

// get returns the index of k. It is find for the hot path of Owner.
func (x *keyIndex) get(keys []keyState, k repokey.Key) (int32, bool) {
	h := maphash.String(x.seed, string(k))
	mask := uint64(len(x.slots) - 1)
	for p := h >> x.shift; ; p = (p + 1) & mask {
		s := x.slots[p]
		if s == 0 {
			return 0, false
		}
		if i := int32(uint32(s) - 1); s>>32 == h>>32 && keys[i].key == k {
			return i, true
		}
	}
}

// lookup is get for a key as it is written: a snapshot's, which names a
// key of the engine's set or none (keys[i].key is then the Key).
func (x *keyIndex) lookup(keys []keyState, k string) (int32, bool) {
	h := maphash.String(x.seed, k)
	mask := uint64(len(x.slots) - 1)
	for p := h >> x.shift; ; p = (p + 1) & mask {
		s := x.slots[p]
		if s == 0 {
			return 0, false
		}
		if i := int32(uint32(s) - 1); s>>32 == h>>32 && string(keys[i].key) == k {
			return i, true
		}
	}
}

// insert records that k is keys[i], unless k is in the index already.
func (x *keyIndex) insert(keys []keyState, k repokey.Key, i int32) bool {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.resize(2 * len(x.slots))
	}
	p, h, found := x.find(keys, k)
	if found {
		return false
	}
	x.slots[p] = h>>32<<32 | uint64(i+1)
	x.n++
	return true
}

// move records that k, in the index, is now keys[i].
func (x *keyIndex) move(keys []keyState, k repokey.Key, i int32) {
	p, _, _ := x.find(keys, k)
	x.slots[p] = x.slots[p]>>32<<32 | uint64(i+1)
}

// remove deletes k, in the index, and closes the gap it leaves: each slot
// after it up to the next empty one that may move back (its home slot is
// not between the gap and itself) fills the gap, and leaves its own.
func (x *keyIndex) remove(keys []keyState, k repokey.Key) {
	gap, _, _ := x.find(keys, k)
	mask := uint64(len(x.slots) - 1)
	for p := (gap + 1) & mask; x.slots[p] != 0; p = (p + 1) & mask {
		if home := x.slots[p] >> x.shift; (p-home)&mask >= (p-gap)&mask {
			x.slots[gap] = x.slots[p]
			gap = p
		}
	}
	x.slots[gap] = 0
	x.n--
}

// build indexes keys, the engine's whole key list, into the index, which
// must be empty and sized for them (reserve). Inserting a million keys one
// by one writes the table at random, a cache miss each; build sorts the
// slots by home slot (a radix sort of the hash's top bits) and lays them
// out from the first slot to the last, so the table is written in order.
// It reports false, leaving the index empty, if a key is listed twice.
func (x *keyIndex) build(keys []keyState) bool {
	n := len(keys)
	if n == 0 {
		return true
	}
	if x.n != 0 || n > len(x.slots)/4*3 || n >= 1<<32-1 {
		panic("placement: build needs an empty index sized for its keys")
	}
	words := make([]uint64, n)
	for i := range keys {
		h := maphash.String(x.seed, string(keys[i].key))
		words[i] = h>>32<<32 | uint64(i+1)
	}
	// The table, still empty, is the sort's scratch space.
	sortByHome(words, x.slots[:n], x.shift)
	clear(x.slots[:n])

	// Equal keys have equal hashes, so they are in one run of slots with
	// the same home; such runs are short.
	for i := 1; i < n; i++ {
		for j := i - 1; j >= 0 && words[j]>>x.shift == words[i]>>x.shift; j-- {
			if words[j]>>32 == words[i]>>32 && keys[uint32(words[i])-1].key == keys[uint32(words[j])-1].key {
				return false
			}
		}
	}

	// Each slot goes to its home slot or the first free one after it. In
	// home order that is the slot after the previous one's, unless its home
	// is further; those that run past the end wrap to the first free slots
	// of the table, which are all before any home a wrapped slot has.
	size := uint64(len(x.slots))
	next := uint64(0)
	var wrapped []uint64
	for _, w := range words {
		p := max(w>>x.shift, next)
		if p >= size {
			wrapped = append(wrapped, w)
			continue
		}
		x.slots[p] = w
		next = p + 1
	}
	p := uint64(0)
	for _, w := range wrapped {
		for x.slots[p] != 0 {
			p++
		}
		x.slots[p] = w
	}
	x.n = n
	return true
}

// sortByHome sorts slot words by their home slot (w >> shift), with a
// least-significant-digit radix sort of 11 bits a pass, in scratch (as long
// as words) and words.
func sortByHome(words, scratch []uint64, shift uint) {
	const digit = 11
	src, dst := words, scratch
	for low := shift; low < 64; low += digit {
		var count [1 << digit]int
		for _, w := range src {
			count[w>>low&(1<<digit-1)]++
		}
		pos := 0
		for d, c := range count {
			count[d], pos = pos, pos+c
		}
		for _, w := range src {
			d := w >> low & (1<<digit - 1)
			dst[count[d]] = w
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &words[0] { // an odd number of passes
		copy(words, src)
	}
}
