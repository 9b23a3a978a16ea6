package node

import (
	"slices"
	"sort"
	"strings"

	"github.com/gitfleet/gitfleet/internal/api"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A listing of the API walks the keys in order. At a million repositories,
// sorting them for each request (and looking at each one's mirror on disk)
// would cost seconds a page; the keys are sorted once after the key set
// changes, a prefix is a binary search, and only the page's repositories
// are looked at on disk.

// listed is one repository of a page: its key and its state, a copy built
// for the page (viewTable.get), and so safe to read without the lock.
type listed struct {
	key string
	st  *fleetv1.RepoState
}

// sortedIndex keeps the keys of a view in order. Keys added or removed
// since the last listing are merged in at the next one: a sort of the new
// keys and one pass over the old, not a sort of a million.
type sortedIndex struct {
	keys    []string // in order; never modified: a merge makes a new slice
	added   []string // keys added since, in no order
	removed map[string]bool
	rebuilt int // times a merge disagreed with the view, for tests
}

// add notes that key joined the view.
func (x *sortedIndex) add(key string) {
	delete(x.removed, key)
	x.added = append(x.added, key)
}

// remove notes that key left the view.
func (x *sortedIndex) remove(key string) {
	if x.removed == nil {
		x.removed = make(map[string]bool)
	}
	x.removed[key] = true
}

// of returns the keys of view in order.
func (x *sortedIndex) of(view *viewTable) []string {
	return x.ordered(view.len(), func(keys []string) []string {
		for k := range view.keys() {
			keys = append(keys, k)
		}
		return keys
	})
}

// ordered returns the index's keys in order: want of them, which all
// appends to a slice when the bookkeeping went wrong.
func (x *sortedIndex) ordered(want int, all func([]string) []string) []string {
	if len(x.added) == 0 && len(x.removed) == 0 && len(x.keys) == want {
		return x.keys
	}
	slices.Sort(x.added)
	keys := make([]string, 0, want)
	keep := func(k string) {
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
// owner or state filter it costs a binary search and the page; with one,
// a walk of the keys under the prefix.
func listPage(sorted []string, view *viewTable, f api.RepoFilter) (page []listed, total int) {
	lo, hi := 0, len(sorted)
	if f.Prefix != "" {
		lo = sort.SearchStrings(sorted, f.Prefix)
		hi = lo + sort.Search(len(sorted)-lo, func(i int) bool { return !strings.HasPrefix(sorted[lo+i], f.Prefix) })
	}
	in := func(i int) bool { return f.Limit <= 0 || i < f.Offset+f.Limit }
	if f.Owner == 0 && f.State == "" {
		for i := lo + max(f.Offset, 0); i < hi && in(i-lo); i++ {
			page = append(page, listed{sorted[i], view.get(sorted[i])})
		}
		return page, hi - lo
	}
	for _, k := range sorted[lo:hi] {
		v, _ := view.view(k)
		if f.Owner != 0 && v.owner != f.Owner || f.State != "" && view.states.name(v.state) != f.State {
			continue
		}
		if total >= f.Offset && in(total) {
			page = append(page, listed{k, view.state(k, v)})
		}
		total++
	}
	return page, total
}
