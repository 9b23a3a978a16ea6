package repoview

import (
	"iter"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// repoTable holds, for every repository the full node knows, its entry
// (view.go) and its class (classtable.go) in one slot: one map from key to
// slot for both, where two maps of a million keys each cost about 80 bytes
// a key apiece. Slots live in chunks that never move, so a slot's address
// is stable, and a freed slot is reused. A slot is in use while it holds a
// view or a class: the counters drop a key's class after the view has
// dropped the key (the full node reclasses a key after each change).
type repoTable struct {
	index  map[repokey.Key]int32
	chunks [][]repoSlot
	free   []int32
}

type repoSlot struct {
	view    Entry
	class   packedClass
	inView  bool
	classed bool
}

// chunkBits sets the slots of a chunk: 4,096 of 96 bytes.
const chunkBits = 12

func newRepoTable() *repoTable { return &repoTable{index: map[repokey.Key]int32{}} }

func (t *repoTable) at(i int32) *repoSlot { return &t.chunks[i>>chunkBits][i&(1<<chunkBits-1)] }

// lookup returns key's slot, or nil.
func (t *repoTable) lookup(key repokey.Key) *repoSlot {
	i, ok := t.index[key]
	if !ok {
		return nil
	}
	return t.at(i)
}

// slot returns key's slot, taking a free one for a new key.
func (t *repoTable) slot(key repokey.Key) *repoSlot {
	if i, ok := t.index[key]; ok {
		return t.at(i)
	}
	var i int32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		n := len(t.chunks)
		last := n - 1
		if n == 0 || len(t.chunks[last]) == cap(t.chunks[last]) {
			t.chunks = append(t.chunks, make([]repoSlot, 0, 1<<chunkBits))
			last = n
		}
		i = int32(last<<chunkBits + len(t.chunks[last]))
		t.chunks[last] = t.chunks[last][:len(t.chunks[last])+1]
	}
	t.index[key] = i
	s := t.at(i)
	*s = repoSlot{}
	return s
}

// release frees key's slot s once it holds neither a view nor a class.
func (t *repoTable) release(key repokey.Key, s *repoSlot) {
	if s.inView || s.classed {
		return
	}
	i := t.index[key]
	delete(t.index, key)
	*s = repoSlot{}
	t.free = append(t.free, i)
}

// each yields the keys and slots in use, in no order.
func (t *repoTable) each() iter.Seq2[repokey.Key, *repoSlot] {
	return func(yield func(repokey.Key, *repoSlot) bool) {
		for k, i := range t.index {
			if !yield(k, t.at(i)) {
				return
			}
		}
	}
}
