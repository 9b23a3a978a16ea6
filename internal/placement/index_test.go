package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// checkIndex fails unless every key is found at its index, absent keys are
// not found, and every slot is reachable from its home slot.
func checkIndex(t *testing.T, x *keyIndex, keys []keyState, absent []repokey.Key) {
	t.Helper()
	if x.n != len(keys) {
		t.Fatalf("index counts %d keys, want %d", x.n, len(keys))
	}
	for i, k := range keys {
		if j, ok := x.get(keys, k.key); !ok || j != int32(i) {
			t.Fatalf("get(%q) = %d, %v; want %d", k.key, j, ok, i)
		}
	}
	for _, k := range absent {
		if j, ok := x.get(keys, k); ok {
			t.Fatalf("get(%q) = %d for a key not in the index", k, j)
		}
	}
	mask := uint64(len(x.slots) - 1)
	for p, s := range x.slots {
		if s == 0 {
			continue
		}
		for q := s >> x.shift; q != uint64(p); q = (q + 1) & mask {
			if x.slots[q] == 0 {
				t.Fatalf("slot %d is cut off from its home slot %d by an empty slot %d", p, s>>x.shift, q)
			}
		}
	}
}

func TestKeyIndexAgreesWithAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	universe := make([]repokey.Key, 5000)
	for i := range universe {
		universe[i] = repokey.Key(fmt.Sprintf("k%d", i))
	}
	x := newKeyIndex()
	var keys []keyState // keys[i] is indexed at i, as in Engine.keys
	at := map[repokey.Key]int{}
	for range 200 {
		for range rng.IntN(100) {
			k := universe[rng.IntN(len(universe))]
			if !x.insert(keys, k, int32(len(keys))) {
				if !has(at, k) {
					t.Fatalf("insert(%q) refused a key not in the index", k)
				}
				continue
			}
			if has(at, k) {
				t.Fatalf("insert(%q) took a key already in the index", k)
			}
			at[k] = len(keys)
			keys = append(keys, keyState{key: k})
		}
		// Remove as the engine does: the last key fills the hole.
		for range rng.IntN(90) {
			if len(keys) == 0 {
				break
			}
			i := rng.IntN(len(keys))
			x.remove(keys, keys[i].key)
			delete(at, keys[i].key)
			last := len(keys) - 1
			if i != last {
				keys[i] = keys[last]
				x.move(keys, keys[i].key, int32(i))
				at[keys[i].key] = i
			}
			keys = keys[:last]
		}
		var absent []repokey.Key
		for range 20 {
			if k := universe[rng.IntN(len(universe))]; !has(at, k) {
				absent = append(absent, k)
			}
		}
		checkIndex(t, &x, keys, absent)
	}
	if len(keys) < 500 {
		t.Fatalf("the test grew the index to only %d keys", len(keys))
	}
	// Sizing for a load, as AddKeys does for a catalog, keeps every key.
	x.reserve(20 * len(keys))
	checkIndex(t, &x, keys, []repokey.Key{"absent"})
}

func has(m map[repokey.Key]int, k repokey.Key) bool {
	_, ok := m[k]
	return ok
}

func TestKeyIndexBuildAgreesWithInserts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 3, 11, 12, 13, 100, 1000, 5000} {
		for round := range 20 {
			keys := make([]keyState, n)
			for i := range keys {
				keys[i].key = repokey.Key(fmt.Sprintf("k%d-%d-%d", n, round, rng.Uint64()))
			}
			x := newKeyIndex()
			x.reserve(n)
			if !x.build(keys) {
				t.Fatalf("build of %d distinct keys reported a duplicate", n)
			}
			checkIndex(t, &x, keys, []repokey.Key{"absent", "k"})
			// The built index goes on working like any other: insert,
			// remove and grow.
			more := keyState{key: repokey.Key(fmt.Sprintf("more-%d", round))}
			if !x.insert(keys, more.key, int32(len(keys))) {
				t.Fatalf("insert into a built index refused %q", more.key)
			}
			keys = append(keys, more)
			x.remove(keys, keys[0].key)
			keys[0] = keys[len(keys)-1]
			x.move(keys, keys[0].key, 0)
			keys = keys[:len(keys)-1]
			x.reserve(4 * n)
			checkIndex(t, &x, keys, []repokey.Key{"absent"})
		}
	}
}

func TestKeyIndexBuildRefusesDuplicates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Each round has its own seed, so the twins' neighbours in the table
	// change from round to round.
	for round := range 300 {
		n := 2 + rng.IntN(40)
		keys := make([]keyState, n)
		for i := range keys {
			keys[i].key = repokey.Key(fmt.Sprintf("k%d", i))
		}
		i, j := rng.IntN(n), rng.IntN(n)
		if i == j {
			j = (i + 1) % n
		}
		keys[j].key = keys[i].key
		x := newKeyIndex()
		x.reserve(n)
		if x.build(keys) {
			t.Fatalf("round %d: build accepted %q listed twice", round, keys[i].key)
		}
		if x.n != 0 || slices.ContainsFunc(x.slots, func(s uint64) bool { return s != 0 }) {
			t.Fatalf("round %d: a refused build left slots behind", round)
		}
	}
}

func TestAddKeysOnALoadWithDuplicatesKeepsEachOnce(t *testing.T) {
	e := New(Config{})
	e.AddKeys("a", "b", "", "a", "c", "b")
	if e.Len() != 3 {
		t.Fatalf("engine has %d keys, want 3", e.Len())
	}
	for _, k := range []repokey.Key{"a", "b", "c"} {
		if !e.Has(k) {
			t.Fatalf("engine lost %q", k)
		}
	}
}
