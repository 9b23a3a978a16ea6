package network

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// root returns a commit ID made of c.
func root(c byte) string { return strings.Repeat(string(c), 40) }

func TestNetworks(t *testing.T) {
	type step struct {
		key      string
		roots    []string // set when declare is "" and !remove
		declare  string
		undecl   bool
		remove   bool
		parent   string            // SetParent(key, parent) when set ("-": none)
		expected map[string]string // key -> network after the step ("" standalone)
	}
	a, b, c, d := root('a'), root('b'), root('c'), root('d')
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a lone repository is standalone", []step{
			{key: "x", roots: []string{a}, expected: map[string]string{"x": ""}},
		}},
		{"a shared root makes a network named after it", []step{
			{key: "x", roots: []string{a}},
			{key: "y", roots: []string{b, a}, expected: map[string]string{"x": "root:" + a, "y": "root:" + a}},
		}},
		{"sharing is transitive", []step{
			{key: "x", roots: []string{a}},
			{key: "z", roots: []string{b}},
			{key: "y", roots: []string{a, b}, expected: map[string]string{"x": "root:" + a, "y": "root:" + a, "z": "root:" + a}},
		}},
		{"the name stays when a member with a smaller root joins", []step{
			{key: "x", roots: []string{b}},
			{key: "y", roots: []string{b}},
			{key: "z", roots: []string{a, b}, expected: map[string]string{"x": "root:" + b, "y": "root:" + b, "z": "root:" + b}},
		}},
		{"merged networks keep the larger one's name", []step{
			{key: "x1", roots: []string{a}},
			{key: "x2", roots: []string{a}},
			{key: "y1", roots: []string{c}},
			{key: "y2", roots: []string{c}},
			{key: "y3", roots: []string{c}},
			{key: "bridge", roots: []string{a, c}, expected: map[string]string{
				"x1": "root:" + c, "x2": "root:" + c, "y1": "root:" + c, "y2": "root:" + c, "y3": "root:" + c, "bridge": "root:" + c}},
		}},
		{"a member whose history diverged entirely leaves", []step{
			{key: "x", roots: []string{a}},
			{key: "y", roots: []string{a}},
			{key: "z", roots: []string{a}},
			{key: "z", roots: []string{d}, expected: map[string]string{"x": "root:" + a, "y": "root:" + a, "z": ""}},
		}},
		{"a member that keeps one shared root stays", []step{
			{key: "x", roots: []string{a}},
			{key: "y", roots: []string{a}},
			{key: "y", roots: []string{a, d}, expected: map[string]string{"x": "root:" + a, "y": "root:" + a}},
		}},
		{"removing the bridge splits the network; the larger part keeps the name", []step{
			{key: "x", roots: []string{a}},
			{key: "bridge", roots: []string{a, c}},
			{key: "y1", roots: []string{c}},
			{key: "y2", roots: []string{c}},
			{key: "x2", roots: []string{a}},
			{key: "x3", roots: []string{a}},
			{key: "bridge", remove: true, expected: map[string]string{
				"bridge": "", "x": "root:" + a, "x2": "root:" + a, "x3": "root:" + a, "y1": "root:" + c, "y2": "root:" + c}},
		}},
		{"a declaration places a key before its first clone", []step{
			{key: "x", declare: "linux"},
			{key: "y", declare: "linux", expected: map[string]string{"x": "linux", "y": "linux"}},
		}},
		{"a lone declared key is a network of one", []step{
			{key: "x", declare: "linux", expected: map[string]string{"x": "linux"}},
		}},
		{"detected members join the declared network they share roots with", []step{
			{key: "x", roots: []string{a}},
			{key: "y", roots: []string{a}},
			{key: "decl", declare: "linux"},
			{key: "decl", roots: []string{a}, expected: map[string]string{"x": "linux", "y": "linux", "decl": "linux"}},
		}},
		{"a declaration wins over detection for its key", []step{
			{key: "x", roots: []string{a}},
			{key: "y", roots: []string{a}},
			{key: "z", roots: []string{a}},
			{key: "z", declare: "other", expected: map[string]string{"x": "other", "y": "other", "z": "other"}},
			{key: "w", declare: "mine"},
			{key: "w", roots: []string{a}},
			{key: "v", declare: "mine", expected: map[string]string{"x": "mine", "y": "mine", "z": "other", "w": "mine", "v": "mine"}},
		}},
		{"withdrawing a declaration goes back to detection", []step{
			{key: "x", roots: []string{a}},
			{key: "y", roots: []string{a}},
			{key: "y", declare: "n1"},
			{key: "y", undecl: true, expected: map[string]string{"x": "root:" + a, "y": "root:" + a}},
		}},
		{"a forge's fork relation places a fork before its first clone", []step{
			{key: "up", roots: []string{a}},
			{key: "fork", parent: "up", expected: map[string]string{"up": "fork:up", "fork": "fork:up"}},
			{key: "fork2", parent: "up", expected: map[string]string{"up": "fork:up", "fork": "fork:up", "fork2": "fork:up"}},
		}},
		{"a fork of a repository not cloned yet joins it too", []step{
			{key: "fork", parent: "up", expected: map[string]string{"up": "fork:up", "fork": "fork:up"}},
		}},
		{"a fork's roots, once known, keep it in its parent's network under the name it has", []step{
			{key: "up", roots: []string{a}},
			{key: "fork", parent: "up"},
			{key: "fork", roots: []string{a}, expected: map[string]string{"up": "fork:up", "fork": "fork:up"}},
		}},
		{"a fork whose history diverged entirely leaves its parent's network", []step{
			{key: "up", roots: []string{a}},
			{key: "other", roots: []string{a}},
			{key: "fork", parent: "up", expected: map[string]string{"up": "root:" + a, "other": "root:" + a, "fork": "root:" + a}},
			{key: "fork", roots: []string{d}, expected: map[string]string{"up": "root:" + a, "other": "root:" + a, "fork": ""}},
		}},
		{"a fork relation withdrawn before the roots are known leaves the fork standalone", []step{
			{key: "x1", roots: []string{a}},
			{key: "x2", roots: []string{a}},
			{key: "fork", parent: "x1", expected: map[string]string{"x1": "root:" + a, "fork": "root:" + a}},
			{key: "fork", parent: "-", expected: map[string]string{"x1": "root:" + a, "x2": "root:" + a, "fork": ""}},
		}},
		{"a fork relation does not hold a fork whose roots are known", []step{
			{key: "x", roots: []string{a}},
			{key: "y", roots: []string{c}},
			{key: "y", parent: "x", expected: map[string]string{"x": "", "y": ""}},
		}},
		{"a parent that is the key itself or makes a cycle is ignored", []step{
			{key: "x", parent: "x", expected: map[string]string{"x": ""}},
			{key: "y", parent: "x"},
			{key: "z", parent: "y"},
			{key: "x", parent: "z", expected: map[string]string{"x": "fork:x", "y": "fork:x", "z": "fork:x"}},
		}},
		{"removing a parent forgets the relations that name it", []step{
			{key: "fork", parent: "up"},
			{key: "fork2", parent: "up"},
			{key: "up", remove: true, expected: map[string]string{"up": "", "fork": "", "fork2": ""}},
		}},
		{"removing a fork leaves its parent standalone", []step{
			{key: "up", roots: []string{a}},
			{key: "fork", parent: "up"},
			{key: "fork", remove: true, expected: map[string]string{"up": "", "fork": ""}},
		}},
		{"roots that are not commit IDs are ignored", []step{
			{key: "x", roots: []string{"zz", ""}},
			{key: "y", roots: []string{"zz"}, expected: map[string]string{"x": "", "y": ""}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := New()
			for i, s := range tc.steps {
				switch {
				case s.remove:
					n.Remove(repokey.Key(s.key))
				case s.parent != "":
					n.SetParent(repokey.Key(s.key), repokey.Key(strings.TrimPrefix(s.parent, "-")))
				case s.declare != "" || s.undecl:
					if _, err := n.Declare(repokey.Key(s.key), s.declare); err != nil {
						t.Fatalf("step %d: Declare(%q, %q): %v", i, s.key, s.declare, err)
					}
				default:
					n.SetRoots(repokey.Key(s.key), s.roots)
				}
				for k, want := range s.expected {
					if got := n.Of(repokey.Key(k)); got != want {
						t.Errorf("step %d: Of(%q) = %q, want %q", i, k, got, want)
					}
				}
			}
		})
	}
}

func TestChangesSayWhoMoved(t *testing.T) {
	n := New()
	a, b := root('a'), root('b')
	if ch := n.SetRoots("x", []string{a}); len(ch) != 0 {
		t.Fatalf("a lone key changed networks: %v", ch)
	}
	ch := n.SetRoots("y", []string{a})
	want := []Change{{Key: "x", To: "root:" + a}, {Key: "y", To: "root:" + a}}
	if !slices.Equal(ch, want) {
		t.Fatalf("join: changes %v, want %v", ch, want)
	}
	if ch := n.SetRoots("y", []string{a}); len(ch) != 0 {
		t.Fatalf("the same roots again changed %v", ch)
	}
	ch = n.SetRoots("y", []string{b})
	want = []Change{{Key: "x", From: "root:" + a}, {Key: "y", From: "root:" + a}}
	if !slices.Equal(ch, want) {
		t.Fatalf("leave: changes %v, want %v", ch, want)
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"linux", "Linux_trees-2.x", "a", strings.Repeat("a", MaxNameLen)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "root:abc", "a#2", "a b", "-x", ".x", "a/b", "é", strings.Repeat("a", MaxNameLen+1)} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) = nil, want an error", bad)
		}
	}
	root := strings.Repeat("0123456789abcdef", 5)[:40]
	for _, ok := range []string{"linux", "root:" + root, "root:" + strings.Repeat("ab", 32), "root:" + root + ".2", "root:" + root + ".17",
		"fork:github.com/torvalds/linux", "fork:github.com/a/b.2", "fork:git.example:8443/a/b.git-tools"} {
		if err := CheckAnyName(ok); err != nil {
			t.Errorf("CheckAnyName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a/b", "root:", "root:abc", "root:" + strings.ToUpper(root), "root:" + root + ".1",
		"root:" + root + ".02", "root:" + root + ".x", "root:" + root + ".", "fork:", "fork:../../etc", "fork:github.com/a/b/../c",
		"fork:https://github.com/a/b", "fork:github.com/a b", "Root:" + root} {
		if err := CheckAnyName(bad); err == nil {
			t.Errorf("CheckAnyName(%q) = nil, want an error", bad)
		}
	}
	n := New()
	if _, err := n.Declare("x", "a/b"); err == nil || n.Of("x") != "" {
		t.Errorf("an invalid declared name was taken: err %v, network %q", err, n.Of("x"))
	}
}

func TestRestoreKeepsNames(t *testing.T) {
	n := New()
	a, b := root('a'), root('b')
	n.SetRoots("x", []string{b})
	n.SetRoots("y", []string{b})
	n.SetRoots("z", []string{a, b}) // joins under root:b, though a is smaller
	n.Declare("d", "decl")
	var entries []Entry
	n.Each(func(e Entry) { entries = append(entries, e) })
	r := Restore(entries)
	for _, k := range []string{"x", "y", "z", "d"} {
		if r.Of(repokey.Key(k)) != n.Of(repokey.Key(k)) {
			t.Errorf("restored Of(%q) = %q, want %q", k, r.Of(repokey.Key(k)), n.Of(repokey.Key(k)))
		}
	}
}

// partition is the grouping of keys into networks, without names.
func partition(n *Networks, keys []string) string {
	groups := map[string][]string{}
	for _, k := range keys {
		if name := n.Of(repokey.Key(k)); name != "" {
			groups[name] = append(groups[name], k)
		}
	}
	var out []string
	for _, g := range groups {
		slices.Sort(g)
		out = append(out, strings.Join(g, ","))
	}
	slices.Sort(out)
	return strings.Join(out, " | ")
}

// TestPartitionIsOrderIndependent feeds the same final roots and fork
// relations in random orders, through detours (roots set, then changed;
// keys removed, then set again; a fork's parent set, then changed), and
// checks that the same keys end up together. Removals come before the
// fork relations: Remove forgets the relations that name its key.
func TestPartitionIsOrderIndependent(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		const nkeys = 40
		keys := make([]string, nkeys)
		final := make([][]string, nkeys)
		parent := make([]string, nkeys)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%02d", i)
			for range rng.IntN(3) {
				final[i] = append(final[i], root(byte('a'+rng.IntN(12))))
			}
		}
		for i := range keys {
			// A fork's parent is older: no cycles, as on a forge.
			if i > 0 && rng.IntN(3) == 0 {
				parent[i] = keys[rng.IntN(i)]
			}
		}
		var want string
		for run := range 5 {
			n := New()
			for _, i := range rng.Perm(nkeys) {
				if rng.IntN(3) == 0 { // a detour
					n.SetRoots(repokey.Key(keys[i]), []string{root(byte('a' + rng.IntN(12)))})
					if rng.IntN(2) == 0 {
						n.Remove(repokey.Key(keys[i]))
					}
				}
				n.SetRoots(repokey.Key(keys[i]), final[i])
			}
			for _, i := range rng.Perm(nkeys) {
				if rng.IntN(3) == 0 { // a detour
					n.SetParent(repokey.Key(keys[i]), repokey.Key(keys[rng.IntN(nkeys)]))
					n.SetRoots(repokey.Key(keys[i]), nil)
					n.SetRoots(repokey.Key(keys[i]), final[i])
				}
				n.SetParent(repokey.Key(keys[i]), repokey.Key(parent[i]))
			}
			got := partition(n, keys)
			if run == 0 {
				want = got
				continue
			}
			if got != want {
				t.Fatalf("seed %d run %d: partition\n%s\nwant\n%s", seed, run, got, want)
			}
			for i, k := range keys {
				if p := parent[i]; p != "" && len(final[i]) == 0 && n.Of(repokey.Key(k)) != n.Of(repokey.Key(p)) {
					t.Fatalf("seed %d: %s, a fork of %s whose roots are unknown, is in %q, its parent in %q", seed, k, p, n.Of(repokey.Key(k)), n.Of(repokey.Key(p)))
				}
				if name := n.Of(repokey.Key(k)); name != "" && n.Size(name) < 2 {
					t.Fatalf("seed %d: %s in a network of one without a declaration", seed, k)
				}
			}
		}
	}
}

func FuzzNetworks(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 1, 1, 4, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		n := New()
		var keys []string
		for i := 0; i+1 < len(ops); i += 2 {
			k := fmt.Sprintf("k%d", ops[i]%8)
			keys = append(keys, k)
			switch op := ops[i+1]; op % 5 {
			case 0:
				n.Remove(repokey.Key(k))
			case 1:
				n.Declare(repokey.Key(k), fmt.Sprintf("n%d", op/4%2))
			case 4:
				p := fmt.Sprintf("k%d", op/5%9) // k8 is never set: a parent with no state of its own
				keys = append(keys, p)
				n.SetParent(repokey.Key(k), repokey.Key(p))
			case 3:
				if op/5%2 == 0 {
					n.SetRoots(repokey.Key(k), nil)
					break
				}
				fallthrough
			default:
				n.SetRoots(repokey.Key(k), []string{root(byte('a' + op/4%6)), root(byte('a' + op/24%6))})
			}
		}
		// Whatever the path, the networks are what Restore computes
		// from the final links, grouping for grouping.
		var entries []Entry
		n.Each(func(e Entry) { entries = append(entries, e) })
		if got, want := partition(n, keys), partition(Restore(entries), keys); got != want {
			t.Fatalf("partition %q, restored %q", got, want)
		}
		for name, m := range n.members {
			for k := range m {
				if n.of[k] != name {
					t.Fatalf("%s is a member of %s but Of says %q", k, name, n.of[k])
				}
			}
		}
	})
}
