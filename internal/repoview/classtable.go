package repoview

import (
	"iter"
	"math"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// classTable holds the class of every repository of the view (counters.go)
// in 12 bytes: the state, the error class, the minute of the last check
// in 32 bits.
type classTable struct {
	tab *repoTable // shared with the View
	n   int
}

type packedClass struct {
	owner    uint32
	verified int32 // minutes since 1970 of verified_at, or neverVerified
	state    repostate.State
	errClass repostate.Class
	current  bool
}

// newClassTable returns an empty table kept in tab (nil: a table of its
// own).
func newClassTable(tab *repoTable) *classTable {
	if tab == nil {
		tab = newRepoTable()
	}
	return &classTable{tab: tab}
}

func (t *classTable) unpack(p packedClass) Class {
	return Class{State: p.state, Owner: p.owner, Current: p.current, Verified: int64(p.verified),
		ErrClass: p.errClass}
}

// get returns key's class.
func (t *classTable) get(key repokey.Key) (Class, bool) {
	s := t.tab.lookup(key)
	if s == nil || !s.classed {
		return Class{}, false
	}
	return t.unpack(s.class), true
}

// put records key's class.
func (t *classTable) put(key repokey.Key, cl Class) {
	s := t.tab.slot(key)
	if !s.classed {
		s.classed = true
		t.n++
	}
	s.class = packedClass{owner: cl.Owner, verified: int32(max(min(cl.Verified, math.MaxInt32), math.MinInt32)),
		state: cl.State, errClass: cl.ErrClass, current: cl.Current}
}

func (t *classTable) del(key repokey.Key) {
	s := t.tab.lookup(key)
	if s == nil || !s.classed {
		return
	}
	s.class, s.classed = packedClass{}, false
	t.n--
	t.tab.release(key, s)
}

// all yields every key and its class, in no order.
func (t *classTable) all() iter.Seq2[repokey.Key, Class] {
	return func(yield func(repokey.Key, Class) bool) {
		for k, s := range t.tab.each() {
			if s.classed && !yield(k, t.unpack(s.class)) {
				return
			}
		}
	}
}
