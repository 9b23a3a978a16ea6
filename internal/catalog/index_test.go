package catalog

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// TestKeyIndexWithMatchesAMap applies random changes through with() and
// checks every version against a plain map, including the old versions
// (with must never modify its receiver).
func TestKeyIndexWithMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	name := &fileName{"f"}
	entries := make([]entry, 3000)
	for i := range entries {
		entries[i] = entry{key: repokey.Key(fmt.Sprintf("h/k%d", i)), name: name}
	}
	type version struct {
		ix    keyIndex
		model map[repokey.Key]*entry
	}
	f := &fileData{name: name}
	f.setEntries(entries[:100], make([]int32, 100))
	first := buildKeyIndex([]*fileData{f})
	model := make(map[repokey.Key]*entry)
	for i := range 100 {
		model[entries[i].key] = first.get(entries[i].key.String())
	}
	versions := []version{{first, model}}
	for step := range 60 {
		prev := versions[len(versions)-1]
		next := make(map[repokey.Key]*entry, len(prev.model))
		for k, e := range prev.model {
			next[k] = e
		}
		changes := make(map[repokey.Key]keyState)
		for range 1 + rng.IntN(80) {
			e := &entries[rng.IntN(min(len(entries), 200+step*50))]
			if rng.IntN(3) == 0 {
				changes[e.key] = keyState{}
				delete(next, e.key)
			} else {
				changes[e.key] = keyState{kept: e}
				next[e.key] = e
			}
		}
		versions = append(versions, version{prev.ix.with(changes), next})
	}
	for vi, v := range versions {
		if v.ix.n != len(v.model) {
			t.Fatalf("version %d: n = %d, want %d", vi, v.ix.n, len(v.model))
		}
		for i := range entries {
			k := entries[i].key
			if got, want := v.ix.get(k.String()), v.model[k]; got != want {
				t.Fatalf("version %d: get(%q) = %v, want %v", vi, k, got, want)
			}
		}
	}
}

// TestBuildKeyIndexKeepsTheFirstByLocationWhateverTheFileOrder gives the
// files in reverse path order: the kept entry of a key is still the first
// by file path, then line, and the others are its duplicates.
func TestBuildKeyIndexKeepsTheFirstByLocationWhateverTheFileOrder(t *testing.T) {
	var files []*fileData
	for _, path := range []string{"c.list", "b/x.list", "b.list", "a.list"} {
		name := &fileName{path}
		slab := []entry{{key: "h/shared", name: name}, {key: repokey.Key("h/own-" + path), name: name}, {key: "h/shared", name: name}}
		f := &fileData{name: name}
		f.setEntries(slab, []int32{1, 2, 3})
		files = append(files, f)
	}
	for _, workers := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", workers), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(workers))
			ix := buildKeyIndex(files)
			kept, dups := ix.lookup("h/shared")
			if kept == nil || kept.name.path != "a.list" || kept != files[3].entries[0] {
				t.Fatalf("kept %+v, want the first entry of a.list", kept)
			}
			var got []string
			for _, d := range dups {
				got = append(got, d.name.path)
			}
			// In location order: a.list:3, b.list:1, b.list:3, b/x.list:1, ...
			want := []string{"a.list", "b.list", "b.list", "b/x.list", "b/x.list", "c.list", "c.list"}
			if !slices.Equal(got, want) {
				t.Errorf("duplicates in %q, want %q", got, want)
			}
			if ix.n != 5 || ix.dups != 7 {
				t.Errorf("n = %d, dups = %d, want 5 and 7", ix.n, ix.dups)
			}
		})
	}
}
