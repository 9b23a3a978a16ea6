package catalog

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyIndexWithMatchesAMap applies random changes through with() and
// checks every version against a plain map, including the old versions
// (with must never modify its receiver).
func TestKeyIndexWithMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	name := &fileName{"f"}
	entries := make([]entry, 3000)
	for i := range entries {
		entries[i] = entry{key: fmt.Sprintf("h/k%d", i), name: name}
	}
	type version struct {
		ix    keyIndex
		model map[string]*entry
	}
	f := &fileData{name: name}
	f.setEntries(entries[:100], make([]int32, 100))
	first := buildKeyIndex([]*fileData{f})
	model := make(map[string]*entry)
	for i := range 100 {
		model[entries[i].key] = first.get(entries[i].key)
	}
	versions := []version{{first, model}}
	for step := range 60 {
		prev := versions[len(versions)-1]
		next := make(map[string]*entry, len(prev.model))
		for k, e := range prev.model {
			next[k] = e
		}
		changes := make(map[string]keyState)
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
			if got, want := v.ix.get(k), v.model[k]; got != want {
				t.Fatalf("version %d: get(%q) = %v, want %v", vi, k, got, want)
			}
		}
	}
}
