// Package network owns fork networks: which repositories share history, so
// that the placement puts them on one node and nodes keep their shared
// objects once. Two repositories whose histories share a root commit are in
// one network, transitively; a catalog attribute (network: NAME) declares a
// key's network before its first clone, and a declared network wins over
// detection for that key.
//
// It is pure: the coordinator feeds it the roots that trusted (full) nodes
// report and the catalog's declarations, and gets back the keys whose
// network changed. It does no I/O and does not read the clock; it does not
// decide whose roots to trust (the coordinator does) nor where a network
// is placed (package placement does).
//
// A network's name is history: a network found by detection is named
// "root:" and one of its root commits when it is first found, and keeps
// that name as members join. When networks merge, the merged one keeps the
// name that most of its members had (ties: the smaller name), so the
// fewest keys change name, and a name is where the ring places a network,
// so the fewest keys move. When a network splits (a member's history
// diverged entirely, or the member that joined two was removed), the
// largest part keeps the name. Which keys are together never depends on
// the order of the events; which name they go under may.
package network

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Limits of names and roots.
const (
	// MaxNameLen bounds a declared network's name.
	MaxNameLen = 64
	// MaxRoots is the most root commits a key's report carries.
	MaxRoots = 16
	// detectedPrefix starts a detected network's name. Declared names
	// cannot contain ':', so the two never collide.
	detectedPrefix = "root:"
	// declPrefix marks a declared name among the roots of the graph: keys
	// that declare one name are joined as keys sharing a root are.
	declPrefix = "\x00"
)

// CheckName tells whether name may be declared as a network: 1 to
// MaxNameLen characters of ASCII letters, digits, '.', '_' and '-', not
// starting with '.' or '-'. ':' is kept for detected names and '#' for the
// parts of a split network.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("network name is empty")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("network name %.20q... is %d characters long; at most %d are allowed", name, len(name), MaxNameLen)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("network name %q starts with %q; start it with a letter or digit", name, name[0])
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("network name %q has %q; use letters, digits, '.', '_' and '-'", name, c)
		}
	}
	return nil
}

// checkRoot tells whether r looks like a commit ID: 40 or 64 lower-case hex
// digits.
func checkRoot(r string) bool {
	if len(r) != 40 && len(r) != 64 {
		return false
	}
	for i := 0; i < len(r); i++ {
		if c := r[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Change says that key moved from one network to another ("" is none).
type Change struct {
	Key      string
	From, To string
}

// Networks is the state of every key's network. The zero value is not
// usable: create it with New. It is not safe for concurrent use.
type Networks struct {
	// links are each key's roots (sorted) and, if it declares a network,
	// that name behind declPrefix: the edges of the graph whose connected
	// components, over the keys, make the networks.
	links map[string][]string
	// keys are the keys of each root (and declared name), the reverse of links.
	keys map[string]map[string]struct{}
	// of is the network of each key in one; members its reverse.
	of      map[string]string
	members map[string]map[string]struct{}
}

// New returns an empty state.
func New() *Networks {
	return &Networks{links: map[string][]string{}, keys: map[string]map[string]struct{}{},
		of: map[string]string{}, members: map[string]map[string]struct{}{}}
}

// Entry is one key's stored state: its roots, its declared network, and
// the network it was in (for names; see Restore).
type Entry struct {
	Key      string
	Roots    []string
	Declared string
	Network  string
}

// Restore builds the state of entries at once: the networks they form,
// under the names they had where their members agree (as when networks
// merge: the name most members had). Entries with an invalid declared
// name or invalid roots lose them, as SetRoots and Declare would.
func Restore(entries []Entry) *Networks {
	n := New()
	prev := make(map[string]string, len(entries))
	seeds := make([]string, 0, len(entries))
	for _, e := range entries {
		declared := e.Declared
		if CheckName(declared) != nil {
			declared = ""
		}
		n.setLinks(e.Key, cleanRoots(e.Roots), declared)
		if e.Network != "" {
			prev[e.Key] = e.Network
		}
		seeds = append(seeds, e.Key)
	}
	n.recompute(seeds, prev)
	return n
}

// Of returns key's network, "" if it is standalone.
func (n *Networks) Of(key string) string { return n.of[key] }

// Members returns the keys of network name, sorted.
func (n *Networks) Members(name string) []string {
	return slices.Sorted(maps.Keys(n.members[name]))
}

// Size returns the number of keys in network name.
func (n *Networks) Size(name string) int { return len(n.members[name]) }

// Roots returns the roots last set for key.
func (n *Networks) Roots(key string) []string { return slices.Clone(n.roots(key)) }

// Declared returns the network key declares, "" if none.
func (n *Networks) Declared(key string) string { return n.declared(key) }

// Each calls fn for every key with roots or a declaration: its state, to store.
func (n *Networks) Each(fn func(Entry)) {
	for k := range n.links {
		fn(Entry{Key: k, Roots: n.Roots(k), Declared: n.declared(k), Network: n.of[k]})
	}
}

// SetRoots records the root commits of key's history, as a trusted node
// reports them (at most MaxRoots; others, and strings that are not commit
// IDs, are ignored; none: the key's history is unknown or empty, and it
// shares nothing). It returns the keys whose network changed: key joining
// a network, networks merging, or key leaving its network because its
// history shares nothing with it any more (and what is left of a network
// splitting, if key held it together).
func (n *Networks) SetRoots(key string, roots []string) []Change {
	if key == "" {
		return nil
	}
	roots = cleanRoots(roots)
	if slices.Equal(roots, n.roots(key)) {
		return nil
	}
	return n.relink(key, roots, n.declared(key))
}

// Declare records that key declares network name ("": it declares none).
// An invalid name is an error, and changes nothing.
func (n *Networks) Declare(key, name string) ([]Change, error) {
	if name != "" {
		if err := CheckName(name); err != nil {
			return nil, err
		}
	}
	if key == "" || name == n.declared(key) {
		return nil, nil
	}
	return n.relink(key, n.roots(key), name), nil
}

// Remove forgets key (removed from the catalog): the returned changes say
// it left its network, and what is left of the network if it split.
func (n *Networks) Remove(key string) []Change {
	if _, ok := n.links[key]; !ok {
		return nil
	}
	return n.relink(key, nil, "")
}

func (n *Networks) roots(key string) []string {
	l := n.links[key]
	if len(l) > 0 && strings.HasPrefix(l[0], declPrefix) {
		return l[1:]
	}
	return l
}

func (n *Networks) declared(key string) string {
	if l := n.links[key]; len(l) > 0 && strings.HasPrefix(l[0], declPrefix) {
		return l[0][len(declPrefix):]
	}
	return ""
}

// cleanRoots keeps the valid roots, sorted and distinct, at most MaxRoots.
func cleanRoots(roots []string) []string {
	out := make([]string, 0, min(len(roots), MaxRoots))
	for _, r := range roots {
		if checkRoot(r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxRoots {
		out = out[:MaxRoots]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// relink replaces key's links and recomputes the networks it was and is in.
func (n *Networks) relink(key string, roots []string, declared string) []Change {
	// Every key of key's old network is reached from key or from its old
	// links, whatever part it ends up in.
	seeds := []string{key}
	for _, l := range n.links[key] {
		for k := range n.keys[l] {
			seeds = append(seeds, k)
		}
	}
	n.setLinks(key, roots, declared)
	return n.recompute(seeds, nil)
}

func (n *Networks) setLinks(key string, roots []string, declared string) {
	for _, l := range n.links[key] {
		if ks := n.keys[l]; ks != nil {
			delete(ks, key)
			if len(ks) == 0 {
				delete(n.keys, l)
			}
		}
	}
	links := roots
	if declared != "" {
		links = append([]string{declPrefix + declared}, roots...)
	}
	if len(links) == 0 {
		delete(n.links, key)
		return
	}
	n.links[key] = links
	for _, l := range links {
		ks := n.keys[l]
		if ks == nil {
			ks = map[string]struct{}{}
			n.keys[l] = ks
		}
		ks[key] = struct{}{}
	}
}

// component is a connected part of the graph, being named.
type component struct {
	keys  []string // sorted
	roots []string // sorted; declared names behind declPrefix first
}

// recompute finds the components that contain seeds, names them and
// returns the keys whose network changed. prev, when set, gives the
// previous network of keys (Restore); otherwise the current one is.
func (n *Networks) recompute(seeds []string, prev map[string]string) []Change {
	seen := map[string]bool{}
	var comps []component
	for _, s := range seeds {
		if seen[s] {
			continue
		}
		comps = append(comps, n.walk(s, seen))
	}
	old := map[string]string{}
	for _, c := range comps {
		for _, k := range c.keys {
			from := n.of[k]
			if prev != nil {
				from = prev[k]
			}
			if from != "" {
				old[k] = from
			}
			n.leave(k)
		}
	}
	// The largest components choose their names first: a split leaves
	// the name to its largest part.
	slices.SortFunc(comps, func(a, b component) int {
		if c := cmp.Compare(len(b.keys), len(a.keys)); c != 0 {
			return c
		}
		return strings.Compare(a.keys[0], b.keys[0])
	})
	var changes []Change
	for _, c := range comps {
		name := n.name(c, old)
		for _, k := range c.keys {
			to := name
			if d := n.declared(k); d != "" {
				to = d // a declaration wins for its key
			}
			if to != "" {
				n.join(k, to)
			}
			if now := n.of[k]; prev == nil && old[k] != now {
				changes = append(changes, Change{Key: k, From: old[k], To: now})
			}
		}
	}
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.Key, b.Key) })
	return changes
}

// walk returns the component of key, marking its keys seen.
func (n *Networks) walk(key string, seen map[string]bool) component {
	var c component
	linked := map[string]bool{}
	stack := []string{key}
	seen[key] = true
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		c.keys = append(c.keys, k)
		for _, l := range n.links[k] {
			if linked[l] {
				continue
			}
			linked[l] = true
			c.roots = append(c.roots, l)
			for o := range n.keys[l] {
				if !seen[o] {
					seen[o] = true
					stack = append(stack, o)
				}
			}
		}
	}
	slices.Sort(c.keys)
	slices.Sort(c.roots) // declPrefix sorts first
	return c
}

// name chooses the name of component c, whose keys had the networks old:
// the declared name most of its keys declare; else, for a component of
// more than one key, the name most of its keys had that no larger
// component took; else a new one from its smallest shared root not in use. A
// lone key that declares nothing is standalone (""). Ties go to the
// smaller name.
func (n *Networks) name(c component, old map[string]string) string {
	votes := map[string]int{}
	for _, k := range c.keys {
		if d := n.declared(k); d != "" {
			votes[d]++
		}
	}
	if len(votes) > 0 {
		return best(votes)
	}
	if len(c.keys) < 2 {
		return ""
	}
	for _, k := range c.keys {
		if o := old[k]; strings.HasPrefix(o, detectedPrefix) && n.members[o] == nil {
			votes[o]++
		}
	}
	if len(votes) > 0 {
		return best(votes)
	}
	// A new network is named after its smallest root that two of its
	// members share (one that any member has, if none is shared).
	for _, shared := range []int{2, 1} {
		for _, r := range c.roots {
			if name := detectedPrefix + r; !strings.HasPrefix(r, declPrefix) && len(n.keys[r]) >= shared && n.members[name] == nil {
				return name
			}
		}
	}
	// Every root names another network (they were split off this one
	// while it kept them all): number this one.
	for i := 2; ; i++ {
		if name := fmt.Sprintf("%s%s.%d", detectedPrefix, c.roots[len(c.roots)-1], i); n.members[name] == nil {
			return name
		}
	}
}

// best is the name with the most votes, the smaller on a tie.
func best(votes map[string]int) string {
	var name string
	for v, c := range votes {
		if c > votes[name] || c == votes[name] && v < name {
			name = v
		}
	}
	return name
}

func (n *Networks) join(key, name string) {
	m := n.members[name]
	if m == nil {
		m = map[string]struct{}{}
		n.members[name] = m
	}
	m[key] = struct{}{}
	n.of[key] = name
}

func (n *Networks) leave(key string) {
	name, ok := n.of[key]
	if !ok {
		return
	}
	delete(n.of, key)
	if m := n.members[name]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(n.members, name)
		}
	}
}
