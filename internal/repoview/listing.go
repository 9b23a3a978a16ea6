package repoview

import (
	"slices"
	"sort"
	"strings"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A listing of the API walks the keys in order. At a million repositories,
// sorting them for each request (and looking at each one's mirror on disk)
// would cost seconds a page; the keys are sorted once after the key set
// changes, a prefix is a binary search, and only the page's repositories
// are looked at on disk.

// Filter selects the repositories of a listing: by key prefix, state (nil:
// any), owner (0: any) and fork network ("": any), then a page from Offset
// of at most Limit (0: all).
type Filter struct {
	Prefix        string
	State         *repostate.State
	Owner         uint32
	Network       string
	Offset, Limit int
}

// Listed is one repository of a page: its key and its state, a copy built
// for the page (View.Get), and so safe to read without the lock.
type Listed struct {
	Key   repokey.Key
	State *fleetv1.RepoState
}

// SortedIndex keeps the keys of a view in order. Keys added or removed
// since the last listing are merged in at the next one: a sort of the new
// keys and one pass over the old, not a sort of a million.
type SortedIndex struct {
	keys    []repokey.Key // in order; never modified: a merge makes a new slice
	added   []repokey.Key // keys added since, in no order
	removed map[repokey.Key]bool
	rebuilt int // times a merge disagreed with the view, for tests
}

// Add notes that key joined the view.
func (x *SortedIndex) Add(key repokey.Key) {
	delete(x.removed, key)
	x.added = append(x.added, key)
}

// Remove notes that key left the view.
func (x *SortedIndex) Remove(key repokey.Key) {
	if x.removed == nil {
		x.removed = make(map[repokey.Key]bool)
	}
	x.removed[key] = true
}

// Of returns the keys of view in order. The slice is shared: callers do
// not change it.
func (x *SortedIndex) Of(view *View) []repokey.Key {
	return x.ordered(view.Len(), func(keys []repokey.Key) []repokey.Key {
		for k := range view.Keys() {
			keys = append(keys, k)
		}
		return keys
	})
}

// ordered returns the index's keys in order: want of them, which all
// appends to a slice when the bookkeeping went wrong.
func (x *SortedIndex) ordered(want int, all func([]repokey.Key) []repokey.Key) []repokey.Key {
	if len(x.added) == 0 && len(x.removed) == 0 && len(x.keys) == want {
		return x.keys
	}
	slices.Sort(x.added)
	keys := make([]repokey.Key, 0, want)
	keep := func(k repokey.Key) {
		if !x.removed[k] && (len(keys) == 0 || keys[len(keys)-1] != k) {
			keys = append(keys, k)
		}
	}
	i, j := 0, 0
	for i < len(x.keys) || j < len(x.added) {
		if j == len(x.added) || i < len(x.keys) && x.keys[i] <= x.added[j] {
			keep(x.keys[i])
			i++
		} else {
			keep(x.added[j])
			j++
		}
	}
	if len(keys) != want { // bookkeeping gone wrong: start again
		x.rebuilt++
		keys = all(keys[:0])
		slices.Sort(keys)
	}
	x.keys, x.added, x.removed = keys, nil, nil
	return keys
}

// listPage returns the repositories of one page of a listing, from sorted
// (every key of view, in order), and how many match in all. Without an
// owner, state or network filter it costs a binary search and the page;
// with one, a walk of the keys under the prefix.
func listPage(sorted []repokey.Key, view *View, f Filter) (page []Listed, total int) {
	lo, hi := prefixRange(sorted, f.Prefix)
	in := func(i int) bool { return f.Limit <= 0 || i < f.Offset+f.Limit }
	if f.Owner == 0 && f.State == nil && f.Network == "" {
		for i := lo + max(f.Offset, 0); i < hi && in(i-lo); i++ {
			page = append(page, Listed{sorted[i], view.Get(sorted[i])})
		}
		return page, hi - lo
	}
	for _, k := range sorted[lo:hi] {
		v, _ := view.Entry(k)
		if f.Owner != 0 && v.owner != f.Owner || f.State != nil && v.state != *f.State || f.Network != "" && v.Network() != f.Network {
			continue
		}
		if total >= f.Offset && in(total) {
			page = append(page, Listed{k, view.state(k, v)})
		}
		total++
	}
	return page, total
}

// prefixRange returns the bounds of the keys under prefix in sorted ("":
// all of them), by binary search.
func prefixRange(sorted []repokey.Key, prefix string) (lo, hi int) {
	if prefix == "" {
		return 0, len(sorted)
	}
	lo = sort.Search(len(sorted), func(i int) bool { return string(sorted[i]) >= prefix })
	hi = lo + sort.Search(len(sorted)-lo, func(i int) bool { return !strings.HasPrefix(string(sorted[lo+i]), prefix) })
	return lo, hi
}
