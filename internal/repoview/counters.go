package repoview

import (
	"maps"
	"math"
	"slices"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// The full node keeps what /metrics reports of its repositories (how many
// in each state, how many current) and an ordered index of the keys in
// each state and of each owner as the states change, so that /metrics
// costs O(states) and a filtered listing a binary search and its page,
// not a walk of a million repositories.
//
// A repository's class is what those depend on: its state as the API shows
// it (the owner's, or the mirror's corrupt/repairing while it is broken),
// its owner, and whether it is current. The full node decides the class
// (fullnode's classOf) after every change of an input, and hands it to
// Set.

// Class is what the counters and indexes know of one repository.
type Class struct {
	State   repostate.State
	Owner   uint32
	Current bool
	// For the console (consolecounts.go): the minute of verified_at
	// (VerifiedMinute) and the public class of the last error.
	Verified int64
	ErrClass repostate.Class
}

// Counters are the counters and per-state and per-owner indexes of a
// view's classes.
type Counters struct {
	classes *classTable
	byState map[repostate.State]int
	byOwner map[uint32]int
	current int
	states  map[repostate.State]*SortedIndex
	owners  map[uint32]*SortedIndex
	console *consoleCounts
}

// newCounters returns empty counters, with a table of their own (New
// gives them a View that shares it).
func newCounters() *Counters {
	return &Counters{classes: newClassTable(nil), byState: map[repostate.State]int{}, byOwner: map[uint32]int{},
		states: map[repostate.State]*SortedIndex{}, owners: map[uint32]*SortedIndex{}, console: newConsoleCounts()}
}

// maxPending bounds the keys an index holds unmerged: an index nobody
// lists is merged once it has as many added keys as merged ones (and
// maxPending), so that keys that flip between states do not pile up and
// a merge costs O(1) a change, amortized.
const maxPending = 4096

func mergeDue(x *SortedIndex) bool { return len(x.added) > max(maxPending, len(x.keys)) }

// Set records key's class, or that it left the view (listed false).
func (c *Counters) Set(key repokey.Key, cl Class, listed bool) {
	old, had := c.classes.get(key)
	if had && listed && old == cl {
		return
	}
	c.console.set(key, old, had, cl, listed)
	if had {
		c.byState[old.State]--
		if c.byState[old.State] == 0 {
			delete(c.byState, old.State)
		}
		c.byOwner[old.Owner]--
		if c.byOwner[old.Owner] == 0 {
			delete(c.byOwner, old.Owner)
		}
		if old.Current {
			c.current--
		}
		if !listed || old.State != cl.State {
			c.states[old.State].Remove(key)
		}
		if !listed || old.Owner != cl.Owner {
			c.owners[old.Owner].Remove(key)
		}
	}
	if !listed {
		c.classes.del(key)
		return
	}
	c.classes.put(key, cl)
	c.byState[cl.State]++
	c.byOwner[cl.Owner]++
	if cl.Current {
		c.current++
	}
	if !had || old.State != cl.State {
		x := c.states[cl.State]
		if x == nil {
			x = &SortedIndex{}
			c.states[cl.State] = x
		}
		x.Add(key)
		if mergeDue(x) {
			c.stateKeys(cl.State)
		}
	}
	if !had || old.Owner != cl.Owner {
		x := c.owners[cl.Owner]
		if x == nil {
			x = &SortedIndex{}
			c.owners[cl.Owner] = x
		}
		x.Add(key)
		if mergeDue(x) {
			c.ownerKeys(cl.Owner)
		}
	}
}

// stateKeys returns the keys in state, in order.
func (c *Counters) stateKeys(state repostate.State) []repokey.Key {
	x := c.states[state]
	if x == nil {
		return nil
	}
	return x.ordered(c.byState[state], func(keys []repokey.Key) []repokey.Key {
		for k, cl := range c.classes.all() {
			if cl.State == state {
				keys = append(keys, k)
			}
		}
		return keys
	})
}

// ownerKeys returns the keys of owner, in order.
func (c *Counters) ownerKeys(owner uint32) []repokey.Key {
	x := c.owners[owner]
	if x == nil {
		return nil
	}
	return x.ordered(c.byOwner[owner], func(keys []repokey.Key) []repokey.Key {
		for k, cl := range c.classes.all() {
			if cl.Owner == owner {
				keys = append(keys, k)
			}
		}
		return keys
	})
}

// List returns one page of a listing and how many match in all, from all
// (every key of view, in order: SortedIndex.Of). A state or an owner filter
// alone reads that state's or owner's index: its page (up to maxWalkOffset)
// without merging what changed, the total from the counters; with a prefix
// or a far offset, the merged index, a binary search and the page. A
// network's filter reads the view's index of the network's members, merged.
// Several filters at once walk the smallest of their indexes (under the
// prefix) and check the others.
func (c *Counters) List(all []repokey.Key, view *View, f Filter) ([]Listed, int) {
	if f.State == nil && f.Owner == 0 && f.Network == "" {
		return listPage(all, view, f)
	}
	if f.Prefix == "" && f.Offset <= maxWalkOffset && f.Network == "" && (f.State == nil || f.Owner == 0) {
		// The page, without merging the few keys changed since the last listing.
		var x *SortedIndex
		var total int
		if f.State != nil {
			x, total = c.states[*f.State], c.byState[*f.State]
		} else {
			x, total = c.owners[f.Owner], c.byOwner[f.Owner]
		}
		if x == nil {
			return nil, total
		}
		if len(x.added) <= maxWalkAdded {
			var page []Listed
			for _, k := range x.page(f.Offset, f.Limit) {
				page = append(page, Listed{k, view.Get(k)})
			}
			return page, total
		}
	}
	keys, filters := c.smallestIndex(view, f)
	lo, hi := prefixRange(keys, f.Prefix)
	in := func(i int) bool { return f.Limit <= 0 || i < f.Offset+f.Limit }
	var page []Listed
	if filters == 1 {
		for i := lo + max(f.Offset, 0); i < hi && in(i-lo); i++ {
			page = append(page, Listed{keys[i], view.Get(keys[i])})
		}
		return page, hi - lo
	}
	total := 0
	for _, k := range keys[lo:hi] {
		if !c.match(view, f, k) {
			continue
		}
		if total >= f.Offset && in(total) {
			page = append(page, Listed{k, view.Get(k)})
		}
		total++
	}
	return page, total
}

// smallestIndex returns the keys, in order, of the smallest of the indexes
// of f's filters (a network's members, a state's or an owner's keys; the
// first of them on a tie), and how many filters f has.
func (c *Counters) smallestIndex(view *View, f Filter) (keys []repokey.Key, filters int) {
	var of func() []repokey.Key
	least := math.MaxInt
	consider := func(n int, index func() []repokey.Key) {
		filters++
		if n < least {
			least, of = n, index
		}
	}
	if f.Network != "" {
		consider(view.networkLen(f.Network), func() []repokey.Key { return view.networkKeys(f.Network) })
	}
	if f.State != nil {
		consider(c.byState[*f.State], func() []repokey.Key { return c.stateKeys(*f.State) })
	}
	if f.Owner != 0 {
		consider(c.byOwner[f.Owner], func() []repokey.Key { return c.ownerKeys(f.Owner) })
	}
	return of(), filters
}

// match tells whether key passes f's state, owner and network filters.
func (c *Counters) match(view *View, f Filter, key repokey.Key) bool {
	if f.State != nil || f.Owner != 0 {
		cl, _ := c.classes.get(key)
		if f.State != nil && cl.State != *f.State || f.Owner != 0 && cl.Owner != f.Owner {
			return false
		}
	}
	if f.Network != "" {
		v, _ := view.Entry(key)
		return v.Network() == f.Network
	}
	return true
}

// maxWalkOffset is the largest offset a listing reaches by walking an index
// that has unmerged keys; past it, the index is merged first.
const maxWalkOffset = 1000

// maxWalkAdded is the most keys added since the last merge that a listing
// sorts and walks; with more, the index is merged first.
const maxWalkAdded = 1024

// page returns the index's keys in order from offset, at most limit of them
// (limit <= 0: all), without a merge: a walk of the merged keys and of the
// added ones, sorted, that skips the removed ones. O(offset + limit) and a
// sort of the keys added since the last merge.
func (x *SortedIndex) page(offset, limit int) []repokey.Key {
	slices.Sort(x.added)
	var out []repokey.Key
	i, j, n := 0, 0, 0
	var last repokey.Key
	for limit <= 0 || len(out) < limit {
		var k repokey.Key
		switch {
		case i < len(x.keys) && (j == len(x.added) || x.keys[i] <= x.added[j]):
			k = x.keys[i]
			i++
		case j < len(x.added):
			k = x.added[j]
			j++
		default:
			return out
		}
		if n > 0 && k == last || x.removed[k] {
			continue // a key added again, or removed
		}
		last = k
		if n >= offset {
			out = append(out, k)
		}
		n++
	}
	return out
}

// InState is how many repositories are in state.
func (c *Counters) InState(state repostate.State) int { return c.byState[state] }

// ByState returns a copy of the counts by state: O(states).
func (c *Counters) ByState() map[repostate.State]int { return maps.Clone(c.byState) }

// Current is how many repositories are current.
func (c *Counters) Current() int { return c.current }

// Class returns key's class.
func (c *Counters) Class(key repokey.Key) (Class, bool) { return c.classes.get(key) }

// Rebuilt returns the indexes by state and by owner that lost track of
// their keys and were rebuilt from the classes, with how many times: none,
// unless the bookkeeping went wrong.
func (c *Counters) Rebuilt() (states map[repostate.State]int, owners map[uint32]int) {
	states, owners = map[repostate.State]int{}, map[uint32]int{}
	for s, x := range c.states {
		if x.rebuilt != 0 {
			states[s] = x.rebuilt
		}
	}
	for o, x := range c.owners {
		if x.rebuilt != 0 {
			owners[o] = x.rebuilt
		}
	}
	return states, owners
}
