package node

import (
	"iter"
	"math"
)

// classTable holds the class of every repository of the view (counters.go)
// in 12 bytes: the state and the error class as indexes into a table of
// their few names, the minute of the last check in 32 bits.
type classTable struct {
	tab   *repoTable // shared with the full node's viewTable
	n     int
	names nameTable // states and error classes
}

type packedClass struct {
	owner    uint32
	verified int32 // minutes since 1970 of verified_at, or neverVerified
	state    uint8
	errClass uint8
	current  bool
}

// newClassTable returns an empty table kept in tab (nil: a table of its
// own).
func newClassTable(tab *repoTable) *classTable {
	if tab == nil {
		tab = newRepoTable()
	}
	t := &classTable{tab: tab}
	t.names.id("") // 0: no error class
	return t
}

func (t *classTable) unpack(p packedClass) repoClass {
	return repoClass{state: t.names.name(p.state), owner: p.owner, current: p.current, verified: int64(p.verified),
		errClass: t.names.name(p.errClass)}
}

// get returns key's class.
func (t *classTable) get(key string) (repoClass, bool) {
	s := t.tab.lookup(key)
	if s == nil || !s.classed {
		return repoClass{}, false
	}
	return t.unpack(s.class), true
}

// put records key's class.
func (t *classTable) put(key string, cl repoClass) {
	s := t.tab.slot(key)
	if !s.classed {
		s.classed = true
		t.n++
	}
	s.class = packedClass{owner: cl.owner, verified: int32(max(min(cl.verified, math.MaxInt32), math.MinInt32)),
		state: t.names.id(cl.state), errClass: t.names.id(cl.errClass), current: cl.current}
}

func (t *classTable) del(key string) {
	s := t.tab.lookup(key)
	if s == nil || !s.classed {
		return
	}
	s.class, s.classed = packedClass{}, false
	t.n--
	t.tab.release(key, s)
}

// all yields every key and its class, in no order.
func (t *classTable) all() iter.Seq2[string, repoClass] {
	return func(yield func(string, repoClass) bool) {
		for k, s := range t.tab.each() {
			if s.classed && !yield(k, t.unpack(s.class)) {
				return
			}
		}
	}
}
