package catalog

import (
	"maps"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Both tables are split into shards of about shardTarget items so that an
// update copies the shard directory (n/shardTarget pointers) and the few
// shards it touches, never the whole table. When updates grow a table past
// shardGrow times its target, it is rebuilt with more shards (amortised).
const (
	shardTarget = 64
	shardGrow   = 4
)

func shardCount(n int) int {
	s := n / shardTarget
	if s < 1 {
		return 1
	}
	return 1 << bits.Len(uint(s-1))
}

func hashOf[S ~string](s S) uint64 { return xxhash.Sum64String(string(s)) }

// keyIndex maps each key to the entry kept for it, and remembers the other
// entries with the same key (duplicates) so that one can take over when
// the kept one goes.
type keyIndex struct {
	shards []*keyShard
	n      int
	dups   int // entries not kept, over all keys
}

// keyShard is an open-addressing table (linear probing) of entries by key.
// Each slot has a one-byte tag from the key's hash, so that a probe reads
// an entry only when the tags match. It is immutable once built: a change
// is made on a copy.
type keyShard struct {
	slots []*entry
	tags  []uint8
	n     int
	dups  map[repokey.Key][]*entry // the entries not kept, by key; nil when none
}

func tagOf(h uint64) uint8 { return uint8(h >> 56) }

func (ix *keyIndex) shard(h uint64) *keyShard {
	return ix.shards[h&uint64(len(ix.shards)-1)]
}

func (ix *keyIndex) get(key string) *entry {
	h := hashOf(key)
	s := ix.shard(h)
	return s.slots[s.find(key, h)]
}

// kept says whether e (an entry of one of the catalog's files) is the one
// kept for its key.
func (ix *keyIndex) kept(e *entry) bool {
	if ix.dups == 0 {
		return true // a catalog without duplicates: no hashing
	}
	h := hashOf(e.key)
	s := ix.shard(h)
	if _, dup := s.dups[e.key]; !dup {
		return true
	}
	return s.slots[s.find(string(e.key), h)] == e
}

// lookup returns the kept entry of key and its duplicates.
func (ix *keyIndex) lookup(key repokey.Key) (*entry, []*entry) {
	h := hashOf(key)
	s := ix.shard(h)
	return s.slots[s.find(string(key), h)], s.dups[key]
}

func (ix *keyIndex) eachDup(fn func(kept, dup *entry)) {
	for _, s := range ix.shards {
		for key, ds := range s.dups {
			kept := s.slots[s.find(string(key), hashOf(key))]
			for _, d := range ds {
				fn(kept, d)
			}
		}
	}
}

// find returns the slot of key, or the empty slot where it would go.
func (s *keyShard) find(key string, h uint64) int {
	mask := len(s.slots) - 1
	tag := tagOf(h)
	for i := int(h>>32) & mask; ; i = (i + 1) & mask {
		if e := s.slots[i]; e == nil || s.tags[i] == tag && string(e.key) == key {
			return i
		}
	}
}

// put stores e, whose key is not in s yet.
func (s *keyShard) put(e *entry, h uint64) {
	i := s.find(string(e.key), h)
	s.slots[i], s.tags[i] = e, tagOf(h)
	s.n++
}

// newKeyShard builds a shard of n entries at most, load factor <= 3/4.
func newKeyShard(n int) *keyShard {
	size := 4
	for size*3 < n*4+4 {
		size *= 2
	}
	return &keyShard{slots: make([]*entry, size), tags: make([]uint8, size)}
}

// add inserts e. Entries are added in location order (file path, then
// line), so the first of a key is the one kept and any later one is a
// duplicate. It reads e.key only when a tag matches: at a million entries,
// reading each entry while indexing would cost a cache miss each.
func (s *keyShard) add(e *entry, h uint64) {
	mask := len(s.slots) - 1
	tag := tagOf(h)
	i := int(h>>32) & mask
	for ; s.slots[i] != nil && (s.tags[i] != tag || s.slots[i].key != e.key); i = (i + 1) & mask {
	}
	if s.slots[i] == nil {
		s.slots[i], s.tags[i] = e, tag
		s.n++
		return
	}
	if s.dups == nil {
		s.dups = make(map[repokey.Key][]*entry)
	}
	s.dups[e.key] = append(s.dups[e.key], e)
}

// buildKeyIndex indexes every entry of files. Entries are grouped by shard
// with a counting sort that keeps their location order (file path, then
// line), then the shards are built; each step is split between the CPUs.
// The keys are hashed in both passes of the sort rather than kept between
// them: a cold process would have to fault in an array of a million
// hashes, which costs more than hashing twice.
func buildKeyIndex(files []*fileData) keyIndex {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b *fileData) int { return strings.Compare(a.name.path, b.name.path) })
	first := make([]int, len(files)+1) // index of each file's first entry
	for i, f := range files {
		first[i+1] = first[i] + len(f.entries)
	}
	total := first[len(files)]
	nShards := shardCount(total)
	mask := uint64(nShards - 1)

	// Cut the files into one part per CPU, of about the same number of entries.
	workers := runtime.GOMAXPROCS(0)
	parts := make([]int, workers+1) // parts[p] is the first file of part p
	for p := 1; p <= workers; p++ {
		parts[p], _ = slices.BinarySearch(first[:len(files)], total*p/workers)
	}
	parts[workers] = len(files)
	inParallel := func(fn func(p int)) {
		var wg sync.WaitGroup
		for p := range workers {
			wg.Go(func() { fn(p) })
		}
		wg.Wait()
	}

	next := make([][]int, workers) // per part: entries per shard, then where the next one goes
	inParallel(func(p int) {
		next[p] = make([]int, nShards)
		for fi := parts[p]; fi < parts[p+1]; fi++ {
			for _, e := range files[fi].entries {
				next[p][hashOf(e.key)&mask]++
			}
		}
	})
	start := make([]int, nShards+1)
	for s := range nShards {
		pos := start[s]
		for p := range workers {
			pos, next[p][s] = pos+next[p][s], pos
		}
		start[s+1] = pos
	}
	order := make([]*entry, total)
	orderHashes := make([]uint64, total)
	inParallel(func(p int) {
		for fi := parts[p]; fi < parts[p+1]; fi++ {
			for _, e := range files[fi].entries {
				h := hashOf(e.key)
				j := next[p][h&mask]
				next[p][h&mask]++
				order[j], orderHashes[j] = e, h
			}
		}
	})

	ix := keyIndex{shards: make([]*keyShard, nShards)}
	inParallel(func(p int) {
		for s := p; s < nShards; s += workers {
			sh := newKeyShard(start[s+1] - start[s])
			for j := start[s]; j < start[s+1]; j++ {
				sh.add(order[j], orderHashes[j])
			}
			ix.shards[s] = sh
		}
	})
	for _, s := range ix.shards {
		ix.n += s.n
		ix.dups += s.dupCount()
	}
	return ix
}

// dupCount is the number of entries s does not keep.
func (s *keyShard) dupCount() int {
	n := 0
	for _, ds := range s.dups {
		n += len(ds)
	}
	return n
}

// keyState is the new state of one key: kept is nil when the key is gone.
type keyState struct {
	kept *entry
	dups []*entry
}

// with returns a copy of ix where each key of changes has its new state.
// It copies the shard directory and the shards it touches (a shard is a
// few hundred bytes), so its cost follows the number of changed keys.
func (ix *keyIndex) with(changes map[repokey.Key]keyState) keyIndex {
	out := keyIndex{shards: slices.Clone(ix.shards), n: ix.n, dups: ix.dups}
	mask := uint64(len(ix.shards) - 1)
	copied := make(map[uint64]bool)
	for k, st := range changes {
		h := hashOf(k)
		si := h & mask
		if !copied[si] {
			out.shards[si] = out.shards[si].clone()
			copied[si] = true
		}
		sh := out.shards[si]
		out.n -= sh.n
		out.dups -= len(sh.dups[k])
		sh.set(k, h, st)
		out.n += sh.n
		out.dups += len(sh.dups[k])
	}
	if out.n > shardGrow*shardTarget*len(out.shards) {
		out = out.resharded()
	}
	return out
}

func (s *keyShard) clone() *keyShard {
	return &keyShard{slots: slices.Clone(s.slots), tags: slices.Clone(s.tags), n: s.n, dups: maps.Clone(s.dups)}
}

// set gives key its new state, in place (on a clone).
func (s *keyShard) set(key repokey.Key, h uint64, st keyState) {
	i := s.find(string(key), h)
	if st.kept == nil {
		if s.slots[i] != nil {
			s.remove(i)
		}
		delete(s.dups, key)
		return
	}
	if s.slots[i] == nil {
		if (s.n+1)*4 > len(s.slots)*3 {
			s.grow()
			i = s.find(string(key), h)
		}
		s.n++
	}
	s.slots[i], s.tags[i] = st.kept, tagOf(h)
	if len(st.dups) > 0 {
		s.dups = setDups(s.dups, key, st.dups)
	} else {
		delete(s.dups, key)
	}
}

// remove empties slot i and shifts back the entries after it that would
// no longer be found (deletion without tombstones in linear probing).
func (s *keyShard) remove(i int) {
	mask := len(s.slots) - 1
	s.n--
	for {
		s.slots[i] = nil
		j := i
		for {
			j = (j + 1) & mask
			e := s.slots[j]
			if e == nil {
				return
			}
			home := int(hashOf(e.key)>>32) & mask
			// e may move to i if its home is not cyclically within (i, j].
			if i <= j && (home <= i || home > j) || i > j && home <= i && home > j {
				s.slots[i], s.tags[i] = e, s.tags[j]
				i = j
				break
			}
		}
	}
}

// grow doubles the slots of s.
func (s *keyShard) grow() {
	old := s.slots
	s.slots, s.tags, s.n = make([]*entry, 2*len(old)), make([]uint8, 2*len(old)), 0
	for _, e := range old {
		if e != nil {
			s.put(e, hashOf(e.key))
		}
	}
}

func setDups(m map[repokey.Key][]*entry, k repokey.Key, ds []*entry) map[repokey.Key][]*entry {
	if m == nil {
		m = make(map[repokey.Key][]*entry)
	}
	m[k] = ds
	return m
}

// resharded rebuilds ix with a shard count fit for its size.
func (ix *keyIndex) resharded() keyIndex {
	out := keyIndex{shards: make([]*keyShard, shardCount(ix.n)), n: ix.n, dups: ix.dups}
	mask := uint64(len(out.shards) - 1)
	groups := make([][]*entry, len(out.shards))
	for _, s := range ix.shards {
		for _, e := range s.slots {
			if e != nil {
				i := hashOf(e.key) & mask
				groups[i] = append(groups[i], e)
			}
		}
	}
	for i, es := range groups {
		sh := newKeyShard(len(es))
		for _, e := range es {
			sh.put(e, hashOf(e.key))
		}
		out.shards[i] = sh
	}
	for _, s := range ix.shards {
		for k, ds := range s.dups {
			sh := out.shards[hashOf(k)&mask]
			sh.dups = setDups(sh.dups, k, ds)
		}
	}
	return out
}

// fileTable maps file paths to what they contributed, sharded like
// keyIndex so that an update copies only what it touches.
type fileTable struct {
	shards []map[string]*fileData
	n      int
}

func newFileTable(files []*fileData) fileTable {
	t := fileTable{shards: make([]map[string]*fileData, shardCount(len(files))), n: len(files)}
	mask := uint64(len(t.shards) - 1)
	for _, f := range files {
		i := hashOf(f.name.path) & mask
		if t.shards[i] == nil {
			t.shards[i] = make(map[string]*fileData)
		}
		t.shards[i][f.name.path] = f
	}
	return t
}

func (t *fileTable) get(path string) *fileData {
	return t.shards[hashOf(path)&uint64(len(t.shards)-1)][path]
}

func (t *fileTable) each(fn func(*fileData)) {
	for _, s := range t.shards {
		for _, f := range s {
			fn(f)
		}
	}
}

// with returns a copy of t with changes applied (a nil value removes).
func (t *fileTable) with(changes map[string]*fileData) fileTable {
	out := fileTable{shards: slices.Clone(t.shards), n: t.n}
	mask := uint64(len(t.shards) - 1)
	copied := make(map[uint64]bool)
	for path, f := range changes {
		i := hashOf(path) & mask
		if !copied[i] {
			out.shards[i] = maps.Clone(t.shards[i])
			if out.shards[i] == nil {
				out.shards[i] = make(map[string]*fileData)
			}
			copied[i] = true
		}
		_, had := out.shards[i][path]
		switch {
		case f == nil && had:
			delete(out.shards[i], path)
			out.n--
		case f != nil:
			out.shards[i][path] = f
			if !had {
				out.n++
			}
		}
	}
	if out.n > shardGrow*shardTarget*len(out.shards) {
		var all []*fileData
		out.each(func(f *fileData) { all = append(all, f) })
		out = newFileTable(all)
	}
	return out
}
