package node

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
)

// The full node keeps what /metrics reports of its repositories (how many
// in each state, how many current) and an ordered index of the keys in
// each state and of each owner as the states change, so that /metrics
// costs O(states) and a filtered listing a binary search and its page,
// not a walk of a million repositories.
//
// A repository's class is what those depend on: its state as the API shows
// it (the owner's, or the mirror's corrupt/repairing while it is broken),
// its owner, and whether it is current. Every change of an input (the
// view, a held digest, a broken state) is followed by a reclass of the key,
// which reads the inputs afresh; reclasses are serialized, so the last one
// leaves the counters true.

// repoClass is what the counters and indexes know of one repository.
type repoClass struct {
	state   string
	owner   uint32
	current bool
	// For the console (consolecounts.go): the minute of verified_at
	// and the public class of the last error.
	verified int64
	errClass string
}

// repoCounters are the counters and per-state and per-owner indexes of a
// full node's view; guarded by fullNode.mu.
type repoCounters struct {
	classes *classTable
	byState map[string]int
	byOwner map[uint32]int
	current int
	states  map[string]*sortedIndex
	owners  map[uint32]*sortedIndex
	console *consoleCounts
}

func newRepoCounters() *repoCounters {
	return &repoCounters{classes: newClassTable(nil), byState: map[string]int{}, byOwner: map[uint32]int{},
		states: map[string]*sortedIndex{}, owners: map[uint32]*sortedIndex{}, console: newConsoleCounts()}
}

// maxPending bounds the keys an index holds unmerged: an index nobody
// lists is merged once it has as many added keys as merged ones (and
// maxPending), so that keys that flip between states do not pile up and
// a merge costs O(1) a change, amortized.
const maxPending = 4096

func mergeDue(x *sortedIndex) bool { return len(x.added) > max(maxPending, len(x.keys)) }

// set records key's class, or that it left the view (listed false).
func (c *repoCounters) set(key string, cl repoClass, listed bool) {
	old, had := c.classes.get(key)
	if had && listed && old == cl {
		return
	}
	c.console.set(key, old, had, cl, listed)
	if had {
		c.byState[old.state]--
		if c.byState[old.state] == 0 {
			delete(c.byState, old.state)
		}
		c.byOwner[old.owner]--
		if c.byOwner[old.owner] == 0 {
			delete(c.byOwner, old.owner)
		}
		if old.current {
			c.current--
		}
		if !listed || old.state != cl.state {
			c.states[old.state].remove(key)
		}
		if !listed || old.owner != cl.owner {
			c.owners[old.owner].remove(key)
		}
	}
	if !listed {
		c.classes.del(key)
		return
	}
	c.classes.put(key, cl)
	c.byState[cl.state]++
	c.byOwner[cl.owner]++
	if cl.current {
		c.current++
	}
	if !had || old.state != cl.state {
		x := c.states[cl.state]
		if x == nil {
			x = &sortedIndex{}
			c.states[cl.state] = x
		}
		x.add(key)
		if mergeDue(x) {
			c.stateKeys(cl.state)
		}
	}
	if !had || old.owner != cl.owner {
		x := c.owners[cl.owner]
		if x == nil {
			x = &sortedIndex{}
			c.owners[cl.owner] = x
		}
		x.add(key)
		if mergeDue(x) {
			c.ownerKeys(cl.owner)
		}
	}
}

// stateKeys returns the keys in state, in order.
func (c *repoCounters) stateKeys(state string) []string {
	x := c.states[state]
	if x == nil {
		return nil
	}
	return x.ordered(c.byState[state], func(keys []string) []string {
		for k, cl := range c.classes.all() {
			if cl.state == state {
				keys = append(keys, k)
			}
		}
		return keys
	})
}

// ownerKeys returns the keys of owner, in order.
func (c *repoCounters) ownerKeys(owner uint32) []string {
	x := c.owners[owner]
	if x == nil {
		return nil
	}
	return x.ordered(c.byOwner[owner], func(keys []string) []string {
		for k, cl := range c.classes.all() {
			if cl.owner == owner {
				keys = append(keys, k)
			}
		}
		return keys
	})
}

// list returns one page of a listing and how many match in all, from all
// (every key of view, in order). A state or an owner filter reads that
// state's or owner's index: its page (up to maxWalkOffset) without merging
// what changed, the total from the counters; with a prefix or a far
// offset, the merged index, a binary search and the page. Both filters at
// once walk the smaller of the two indexes (under the prefix).
func (c *repoCounters) list(all []string, view *viewTable, f api.RepoFilter) ([]listed, int) {
	if f.State == "" && f.Owner == 0 {
		return listPage(all, view, f)
	}
	if f.Prefix == "" && f.Offset <= maxWalkOffset && (f.State == "" || f.Owner == 0) {
		// The page, without merging the few keys changed since the last listing.
		x, total := c.states[f.State], c.byState[f.State]
		if f.State == "" {
			x, total = c.owners[f.Owner], c.byOwner[f.Owner]
		}
		if x == nil {
			return nil, total
		}
		if len(x.added) <= maxWalkAdded {
			var page []listed
			for _, k := range x.page(f.Offset, f.Limit) {
				page = append(page, listed{k, view.get(k)})
			}
			return page, total
		}
	}
	var keys []string
	keep := func(string) bool { return true }
	switch {
	case f.Owner == 0:
		keys = c.stateKeys(f.State)
	case f.State == "":
		keys = c.ownerKeys(f.Owner)
	case c.byState[f.State] <= c.byOwner[f.Owner]:
		keys = c.stateKeys(f.State)
		keep = func(k string) bool { cl, _ := c.classes.get(k); return cl.owner == f.Owner }
	default:
		keys = c.ownerKeys(f.Owner)
		keep = func(k string) bool { cl, _ := c.classes.get(k); return cl.state == f.State }
	}
	lo, hi := 0, len(keys)
	if f.Prefix != "" {
		lo = sort.SearchStrings(keys, f.Prefix)
		hi = lo + sort.Search(len(keys)-lo, func(i int) bool { return !strings.HasPrefix(keys[lo+i], f.Prefix) })
	}
	in := func(i int) bool { return f.Limit <= 0 || i < f.Offset+f.Limit }
	var page []listed
	if f.State == "" || f.Owner == 0 {
		for i := lo + max(f.Offset, 0); i < hi && in(i-lo); i++ {
			page = append(page, listed{keys[i], view.get(keys[i])})
		}
		return page, hi - lo
	}
	total := 0
	for _, k := range keys[lo:hi] {
		if !keep(k) {
			continue
		}
		if total >= f.Offset && in(total) {
			page = append(page, listed{k, view.get(k)})
		}
		total++
	}
	return page, total
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
func (x *sortedIndex) page(offset, limit int) []string {
	slices.Sort(x.added)
	var out []string
	i, j, n, last := 0, 0, 0, ""
	for limit <= 0 || len(out) < limit {
		var k string
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

// repoTotals is what /metrics reports of the repositories.
type repoTotals struct {
	byState map[string]int
	total   int
	current int
}

// totals returns the counters: O(states).
func (f *fullNode) totals() repoTotals {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := repoTotals{byState: make(map[string]int, len(f.counts.byState)), total: f.view.len(), current: f.counts.current}
	for s, n := range f.counts.byState {
		t.byState[s] = n
	}
	return t
}

// classOf is key's class as the API shows the repository (backend.repo):
// current as freshness.current says (served, verified, no newer change
// known). The disk is looked at only when the rest says current.
func (f *fullNode) classOf(key string, st classInput) repoClass {
	n := f.n
	cl := repoClass{state: st.state, owner: st.owner, verified: checkMinute(int64(st.verifiedAt) * 1000),
		errClass: api.PublicError(st.lastError)}
	broken := n.verify.brokenState(key)
	if broken != "" {
		cl.state = broken
		return cl
	}
	d, held := n.digest(key)
	fr := st.freshness(d, held && d != "")
	cl.current = fr.current() && n.mirror.Has(key)
	return cl
}

// classInput is what a repository's class depends on in the view, read
// under f.mu (viewTable.classInput, with the hints' part from the full
// node's hintBook) without building its whole state.
type classInput struct {
	state, lastError, digest string
	owner                    uint32
	lastCheck                int64
	verifiedAt               uint32 // unix seconds
	hinted                   bool   // hintBook.pending
	staleOwner               string // hintBook.stale
}

// freshness is what current depends on, given the digest the full node
// serves (served: it holds the repository).
func (in classInput) freshness(digest string, served bool) freshness {
	return freshness{served: served, verifiedAt: fromUnixSeconds(in.verifiedAt), digest: digest, ownerDigest: in.digest,
		ownerCheck: msTime0(in.lastCheck), hinted: in.hinted, staleOwner: in.staleOwner}
}

// msTime0 is a time in unix ms (0: the zero time).
func msTime0(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// reclass brings the counters and indexes up to date with keys' inputs.
// It is called after each change, without f.mu held.
func (f *fullNode) reclass(keys ...string) {
	if len(keys) == 0 {
		return
	}
	f.classMu.Lock()
	defer f.classMu.Unlock()
	ins := make([]classInput, len(keys))
	listed := make([]bool, len(keys))
	f.mu.Lock()
	for i, k := range keys {
		_, listed[i] = f.view.view(k)
		ins[i] = f.freshInput(k)
	}
	f.mu.Unlock()
	cls := make([]repoClass, len(keys))
	for i, k := range keys {
		if listed[i] {
			cls[i] = f.classOf(k, ins[i])
		}
	}
	f.mu.Lock()
	for i, k := range keys {
		f.counts.set(k, cls[i], listed[i])
	}
	f.mu.Unlock()
}
