package repoview

import (
	"strings"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A listing of one fork network's members ("which repositories are in
// torvalds-linux, and which of them fail?") would otherwise walk every key
// of the view. The view keeps, for each network that has members, their
// keys in order (a SortedIndex: 16 bytes a member once merged) and one
// copy of the network's name, which its members' entries share; a
// repository in no network costs nothing.

// netIndex is the members of one fork network.
type netIndex struct {
	name string // the one copy of the name, shared by the members' entries
	n    int
	keys SortedIndex
}

// minNetPending is the fewest changes a network's index holds unmerged:
// past it, and past as many as it has merged keys, it is merged, so that
// a change costs O(1) amortized and an index's unmerged keys never
// outweigh its merged ones by much.
const minNetPending = 16

// netName returns the view's copy of the name of network name, or a copy
// of name for a network that has no members yet.
func (t *View) netName(name string) string {
	if x := t.nets[name]; x != nil {
		return x.name
	}
	return strings.Clone(name)
}

// joinNet notes that key joined network name ("": none).
func (t *View) joinNet(name string, key repokey.Key) {
	if name == "" {
		return
	}
	x := t.nets[name]
	if x == nil {
		x = &netIndex{name: name}
		t.nets[name] = x
	}
	x.n++
	x.keys.Add(key)
	t.mergeIfDue(x)
}

// leaveNet notes that key left network name ("": none).
func (t *View) leaveNet(name string, key repokey.Key) {
	x := t.nets[name]
	if x == nil {
		return
	}
	if x.n--; x.n == 0 {
		delete(t.nets, name)
		return
	}
	x.keys.Remove(key)
	t.mergeIfDue(x)
}

func (t *View) mergeIfDue(x *netIndex) {
	if len(x.keys.added)+len(x.keys.removed) > max(minNetPending, len(x.keys.keys)) {
		t.netKeys(x)
	}
}

// networkLen is how many repositories of the view are in network name.
func (t *View) networkLen(name string) int {
	if x := t.nets[name]; x != nil {
		return x.n
	}
	return 0
}

// networkKeys returns the keys of network name, in order. The slice is
// shared: callers do not change it.
func (t *View) networkKeys(name string) []repokey.Key {
	if x := t.nets[name]; x != nil {
		return t.netKeys(x)
	}
	return nil
}

// netKeys merges x and returns its keys in order.
func (t *View) netKeys(x *netIndex) []repokey.Key {
	return x.keys.ordered(x.n, func(keys []repokey.Key) []repokey.Key {
		for k, s := range t.tab.each() {
			if s.inView && s.view.Network() == x.name {
				keys = append(keys, k)
			}
		}
		return keys
	})
}

// NetworksRebuilt returns the networks whose index lost track of its keys
// and was rebuilt from the entries, with how many times: none, unless the
// bookkeeping went wrong.
func (t *View) NetworksRebuilt() map[string]int {
	out := map[string]int{}
	for name, x := range t.nets {
		if x.keys.rebuilt != 0 {
			out[name] = x.keys.rebuilt
		}
	}
	return out
}
