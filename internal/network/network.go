// Package network owns fork networks: which repositories share history, so
// that the placement puts them on one node and nodes keep their shared
// objects once. Two repositories whose histories share a root commit are in
// one network, transitively; a catalog attribute (network: NAME) declares a
// key's network before its first clone, and a declared network wins over
// detection for that key. A forge's word that a key is a fork of another
// (SetParent) joins the two as a shared root would, until the fork's own
// roots are known: then its roots alone say where it belongs.
//
// It is pure: the coordinator feeds it the roots that trusted (full) nodes
// report and the catalog's declarations, and gets back the keys whose
// network changed. It does no I/O and does not read the clock; it does not
// decide whose roots to trust (the coordinator does) nor where a network
// is placed (package placement does).
//
// A network's name is history: a network found by detection is named
// "root:" and one of its root commits (or "fork:" and the parent's key,
// when a fork relation joined it) when it is first found, and keeps
// that name as members join. When networks merge, the merged one keeps the
// name that most of its members had (ties: the smaller name), so the
// fewest keys change name, and a name is where the ring places a network,
// so the fewest keys move. When a network splits (a member's history
// diverged entirely, or the member that joined two was removed), the
// largest part keeps the name. Which keys are together never depends on
// the order of the events (Remove excepted: it forgets the fork relations
// that name the removed key); which name they go under may.
package network

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/repokey"
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
	// forkPrefix starts the name of a network found by a fork relation.
	forkPrefix = "fork:"
	// declPrefix marks a declared name among the roots of the graph: keys
	// that declare one name are joined as keys sharing a root are.
	declPrefix = "\x00"
	// parentPrefix marks a fork relation among the roots of the graph:
	// parentPrefix+P is a root of P and of the forks of P whose roots are
	// not known yet.
	parentPrefix = "\x01"
	// maxParentChain bounds the walk up a chain of parents that looks for
	// a cycle.
	maxParentChain = 64
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

// CheckAnyName tells whether name may name a network, declared or
// detected, as the fleet shows it (a listing's filter, say): a name
// CheckName accepts, "root:" and a commit ID, or "fork:" and a repository
// key, the last two perhaps numbered ("." and a number) when their root or
// parent names another network.
func CheckAnyName(name string) error {
	rest, ok := strings.CutPrefix(name, detectedPrefix)
	valid := checkRoot
	if !ok {
		if rest, ok = strings.CutPrefix(name, forkPrefix); !ok {
			return CheckName(name)
		}
		valid = func(key string) bool { return repokey.Check(key) == nil }
	}
	if valid(rest) {
		return nil
	}
	if i := strings.LastIndexByte(rest, '.'); i > 0 && valid(rest[:i]) {
		if n, err := strconv.Atoi(rest[i+1:]); err == nil && n >= 2 && strconv.Itoa(n) == rest[i+1:] {
			return nil
		}
	}
	return fmt.Errorf("network name %.80q is no network's: a detected network is named %q and a commit ID, or %q and a repository key (with .N after either for a numbered one)",
		name, detectedPrefix, forkPrefix)
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
	Key      repokey.Key
	From, To string
}

// Networks is the state of every key's network. The zero value is not
// usable: create it with New. It is not safe for concurrent use.
type Networks struct {
	// links are each key's roots, if it declares a network that name
	// behind declPrefix, and its fork relations behind parentPrefix (see
	// setLinks), sorted: the edges of the graph whose connected
	// components, over the keys, make the networks.
	links map[repokey.Key][]string
	// keys are the keys of each root (and declared name), the reverse of links.
	keys map[string]map[repokey.Key]struct{}
	// parent is each fork's parent, as a forge says; children its reverse.
	parent   map[repokey.Key]repokey.Key
	children map[repokey.Key]map[repokey.Key]struct{}
	// of is the network of each key in one; members its reverse.
	of      map[repokey.Key]string
	members map[string]map[repokey.Key]struct{}
}

// New returns an empty state.
func New() *Networks {
	return &Networks{links: map[repokey.Key][]string{}, keys: map[string]map[repokey.Key]struct{}{},
		parent: map[repokey.Key]repokey.Key{}, children: map[repokey.Key]map[repokey.Key]struct{}{},
		of: map[repokey.Key]string{}, members: map[string]map[repokey.Key]struct{}{}}
}

// Entry is one key's stored state: its roots, its declared network, its
// parent (a forge's fork relation), and the network it was in (for names;
// see Restore).
type Entry struct {
	Key      repokey.Key
	Roots    []string
	Declared string
	Parent   repokey.Key
	Network  string
}

// Restore builds the state of entries at once: the networks they form,
// under the names they had where their members agree (as when networks
// merge: the name most members had). Entries with an invalid declared
// name or invalid roots lose them, as SetRoots and Declare would.
func Restore(entries []Entry) *Networks {
	n := New()
	prev := make(map[repokey.Key]string, len(entries))
	seeds := make([]repokey.Key, 0, len(entries))
	for _, e := range entries {
		if e.Parent != "" && e.Parent != e.Key && n.parent[e.Parent] != e.Key {
			n.setParent(e.Key, e.Parent)
		}
	}
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
	// A parent with no entry of its own still carries its forks' root.
	for p := range n.children {
		if _, ok := n.links[p]; !ok {
			n.setLinks(p, nil, "")
			seeds = append(seeds, p)
		}
	}
	n.recompute(seeds, prev)
	return n
}

// Of returns key's network, "" if it is standalone.
func (n *Networks) Of(key repokey.Key) string { return n.of[key] }

// Members returns the keys of network name, sorted.
func (n *Networks) Members(name string) []repokey.Key {
	return slices.Sorted(maps.Keys(n.members[name]))
}

// Size returns the number of keys in network name.
func (n *Networks) Size(name string) int { return len(n.members[name]) }

// Roots returns the roots last set for key.
func (n *Networks) Roots(key repokey.Key) []string { return slices.Clone(n.roots(key)) }

// Declared returns the network key declares, "" if none.
func (n *Networks) Declared(key repokey.Key) string { return n.declared(key) }

// Parent returns the parent last set for key, "" if none.
func (n *Networks) Parent(key repokey.Key) repokey.Key { return n.parent[key] }

// Children returns the keys whose parent is key, sorted.
func (n *Networks) Children(key repokey.Key) []repokey.Key {
	return slices.Sorted(maps.Keys(n.children[key]))
}

// Each calls fn for every key with roots, a declaration, a parent or
// forks: its state, to store.
func (n *Networks) Each(fn func(Entry)) {
	for k := range n.links {
		fn(Entry{Key: k, Roots: n.Roots(k), Declared: n.declared(k), Parent: n.parent[k], Network: n.of[k]})
	}
}

// SetRoots records the root commits of key's history, as a trusted node
// reports them (at most MaxRoots; others, and strings that are not commit
// IDs, are ignored; none: the key's history is unknown or empty, and it
// shares nothing). It returns the keys whose network changed: key joining
// a network, networks merging, or key leaving its network because its
// history shares nothing with it any more (and what is left of a network
// splitting, if key held it together).
func (n *Networks) SetRoots(key repokey.Key, roots []string) []Change {
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
func (n *Networks) Declare(key repokey.Key, name string) ([]Change, error) {
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

// SetParent records that key is a fork of parent, as a forge says (""
// : none). Until key's roots are known, the two are joined as keys
// sharing a root are; once they are, key's roots alone decide, so a fork
// whose history diverged entirely still leaves. A parent that is key
// itself, or that is a fork of key (directly or up a chain of parents),
// is ignored. The caller decides that parent is a key of the fleet.
func (n *Networks) SetParent(key, parent repokey.Key) []Change {
	if key == "" || parent == n.parent[key] || parent == key {
		return nil
	}
	for p, i := parent, 0; p != "" && i < maxParentChain; p, i = n.parent[p], i+1 {
		if p == key {
			return nil // a cycle
		}
	}
	old := n.parent[key]
	seeds := n.linked(key)
	if old != "" {
		seeds = append(seeds, n.linked(old)...)
	}
	n.setParent(key, parent)
	n.setLinks(key, n.roots(key), n.declared(key))
	for _, p := range []repokey.Key{old, parent} {
		if p != "" {
			seeds = append(seeds, n.linked(p)...)
			n.setLinks(p, n.roots(p), n.declared(p))
		}
	}
	return n.recompute(seeds, nil)
}

// setParent records key's parent in parent and children, without links.
func (n *Networks) setParent(key, parent repokey.Key) {
	if old := n.parent[key]; old != "" {
		delete(n.children[old], key)
		if len(n.children[old]) == 0 {
			delete(n.children, old)
		}
		delete(n.parent, key)
	}
	if parent == "" {
		return
	}
	n.parent[key] = parent
	ch := n.children[parent]
	if ch == nil {
		ch = map[repokey.Key]struct{}{}
		n.children[parent] = ch
	}
	ch[key] = struct{}{}
}

// linked is key and the keys that share a link with it.
func (n *Networks) linked(key repokey.Key) []repokey.Key {
	out := []repokey.Key{key}
	for _, l := range n.links[key] {
		for k := range n.keys[l] {
			out = append(out, k)
		}
	}
	return out
}

// Remove forgets key (removed from the catalog), and the fork relations
// that name it: the returned changes say it left its network, and what is
// left of the network if it split. Its forks keep their parent's other
// relations (none: they are standalone until their roots are known).
func (n *Networks) Remove(key repokey.Key) []Change {
	_, linked := n.links[key]
	if !linked && n.parent[key] == "" && len(n.children[key]) == 0 {
		return nil
	}
	seeds := n.linked(key)
	if p := n.parent[key]; p != "" {
		seeds = append(seeds, n.linked(p)...)
	}
	forks := n.Children(key)
	for _, f := range forks {
		n.setParent(f, "")
	}
	if p := n.parent[key]; p != "" {
		n.setParent(key, "")
		n.setLinks(p, n.roots(p), n.declared(p))
	}
	n.setLinks(key, nil, "")
	for _, f := range forks {
		n.setLinks(f, n.roots(f), n.declared(f))
	}
	return n.recompute(seeds, nil)
}

func (n *Networks) roots(key repokey.Key) []string {
	var out []string
	for _, l := range n.links[key] {
		if checkRoot(l) {
			out = append(out, l)
		}
	}
	return out
}

func (n *Networks) declared(key repokey.Key) string {
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
func (n *Networks) relink(key repokey.Key, roots []string, declared string) []Change {
	// Every key of key's old network is reached from key or from its old
	// links, whatever part it ends up in.
	seeds := n.linked(key)
	n.setLinks(key, roots, declared)
	return n.recompute(seeds, nil)
}

func (n *Networks) setLinks(key repokey.Key, roots []string, declared string) {
	for _, l := range n.links[key] {
		if ks := n.keys[l]; ks != nil {
			delete(ks, key)
			if len(ks) == 0 {
				delete(n.keys, l)
			}
		}
	}
	var links []string
	if declared != "" {
		links = append(links, declPrefix+declared)
	}
	// A fork's relation counts until its roots are known; a parent
	// carries the root of its forks.
	if p := n.parent[key]; p != "" && len(roots) == 0 {
		links = append(links, parentPrefix+p.String())
	}
	if len(n.children[key]) > 0 {
		links = append(links, parentPrefix+key.String())
	}
	links = append(links, roots...)
	slices.Sort(links)
	links = slices.Compact(links)
	if len(links) == 0 {
		delete(n.links, key)
		return
	}
	n.links[key] = links
	for _, l := range links {
		ks := n.keys[l]
		if ks == nil {
			ks = map[repokey.Key]struct{}{}
			n.keys[l] = ks
		}
		ks[key] = struct{}{}
	}
}

// component is a connected part of the graph, being named.
type component struct {
	keys  []repokey.Key // sorted
	roots []string      // sorted; declared names behind declPrefix first, then fork relations
}

// recompute finds the components that contain seeds, names them and
// returns the keys whose network changed. prev, when set, gives the
// previous network of keys (Restore); otherwise the current one is.
func (n *Networks) recompute(seeds []repokey.Key, prev map[repokey.Key]string) []Change {
	seen := map[repokey.Key]bool{}
	var comps []component
	for _, s := range seeds {
		if seen[s] {
			continue
		}
		comps = append(comps, n.walk(s, seen))
	}
	old := map[repokey.Key]string{}
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
		return strings.Compare(string(a.keys[0]), string(b.keys[0]))
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
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(string(a.Key), string(b.Key)) })
	return changes
}

// walk returns the component of key, marking its keys seen.
func (n *Networks) walk(key repokey.Key, seen map[repokey.Key]bool) component {
	var c component
	linked := map[string]bool{}
	stack := []repokey.Key{key}
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
func (n *Networks) name(c component, old map[repokey.Key]string) string {
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
		if o := old[k]; (strings.HasPrefix(o, detectedPrefix) || strings.HasPrefix(o, forkPrefix)) && n.members[o] == nil {
			votes[o]++
		}
	}
	if len(votes) > 0 {
		return best(votes)
	}
	// A new network is named after its smallest root that two of its
	// members share (one that any member has, if none is shared); a fork
	// relation comes before a root commit.
	for _, shared := range []int{2, 1} {
		for _, r := range c.roots {
			if name := rootName(r); !strings.HasPrefix(r, declPrefix) && len(n.keys[r]) >= shared && n.members[name] == nil {
				return name
			}
		}
	}
	// Every root names another network (they were split off this one
	// while it kept them all): number this one.
	for i := 2; ; i++ {
		if name := fmt.Sprintf("%s.%d", rootName(c.roots[len(c.roots)-1]), i); n.members[name] == nil {
			return name
		}
	}
}

// rootName is the name of a network named after root r (not a declared
// name).
func rootName(r string) string {
	if p, ok := strings.CutPrefix(r, parentPrefix); ok {
		return forkPrefix + p
	}
	return detectedPrefix + r
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

func (n *Networks) join(key repokey.Key, name string) {
	m := n.members[name]
	if m == nil {
		m = map[repokey.Key]struct{}{}
		n.members[name] = m
	}
	m[key] = struct{}{}
	n.of[key] = name
}

func (n *Networks) leave(key repokey.Key) {
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
