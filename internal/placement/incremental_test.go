package placement

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// checkPlacement fails unless every key's placement is what placing every
// key from scratch gives, and the load bookkeeping matches it.
func checkPlacement(t *testing.T, e *Engine, step int) {
	t.Helper()
	owned := map[uint32]int{}
	for _, k := range e.keys {
		if k.owner != 0 {
			owned[k.owner]++
		}
	}
	if !maps.Equal(owned, e.Load()) {
		t.Fatalf("step %d: Load says %v, the keys' owners are %v", step, e.Load(), owned)
	}
	if e.ring == nil {
		return
	}
	names := make([]string, len(e.keys))
	place := make([]uint32, len(e.keys))
	held := make([]int, len(e.members))
	for i, k := range e.keys {
		names[i], place[i] = string(k.key), k.place
		held[e.rank[k.place]]++
	}
	if want := e.ring.Place(names); !slices.Equal(place, want) {
		t.Fatalf("step %d: placement differs from placing every key from scratch at %d of %d keys", step, changed(place, want), len(want))
	}
	if !slices.Equal(held, e.held) {
		t.Fatalf("step %d: held %v, counted %v", step, e.held, held)
	}
	if e.plain {
		for _, k := range e.keys {
			if id, _ := e.ring.Lookup(string(k.key)); id != k.place {
				t.Fatalf("step %d: plain, but key %q is placed on %d, its consistent-hash owner is %d", step, k.key, k.place, id)
			}
		}
	}
}

// TestCatalogChangesPlaceKeysAsPlacingEveryKeyFromScratch plays random
// sequences of catalog changes, member changes, hand-backs, confirmations
// and failures, and checks after every step that the placement is the
// from-scratch one; at the end, that a fresh engine given the same members,
// keys and overrides, and an engine restored from a snapshot, agree with it
// on every key.
func TestCatalogChangesPlaceKeysAsPlacingEveryKeyFromScratch(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		keys    int // size of the key universe
		members int // size of the member pool
		// What the run must have gone through.
		wantIncremental, wantRecomputed bool
	}{
		{"default vnodes", Config{}, 4000, 6, true, false},
		{"few vnodes", Config{VnodesPerWeight: 100}, 3000, 8, true, true},
		{"tight bound", Config{VnodesPerWeight: 10, LoadFactor: 1.02}, 1500, 10, false, true},
		{"tiny catalog", Config{VnodesPerWeight: 50}, 40, 12, true, true},
	}
	for seed, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 99))
			universe := testKeys(tt.keys)
			cfg := tt.cfg
			cfg.MaxInFlight = 20
			e := New(cfg)
			present := map[repokey.Key]bool{}
			var members []ring.Member
			pick := func(n int) []repokey.Key {
				ks := make([]repokey.Key, n)
				for i := range ks {
					ks[i] = universe[rng.IntN(len(universe))]
				}
				return ks
			}
			incremental, recomputed := 0, 0
			var unanswered []Decision // assigns whose node has not answered yet
			for step := range 300 {
				before := e.placements
				catalog := false
				switch op := rng.IntN(10); {
				case op < 4:
					n := 1 + rng.IntN(tt.keys/20)
					if step == 0 {
						n = tt.keys / 2
					}
					ks := pick(n)
					if rng.IntN(10) == 0 {
						ks = append(ks, "", ks[0]) // empty and repeated keys are ignored
					}
					e.AddKeys(ks...)
					for _, k := range ks {
						if k != "" {
							present[k] = true
						}
					}
					catalog = true
				case op < 7:
					ks := pick(1 + rng.IntN(tt.keys/20))
					e.RemoveKeys(append(ks, "never/added")...)
					for _, k := range ks {
						delete(present, k)
					}
					catalog = true
				case op < 8:
					members = members[:0]
					for id := range uint32(tt.members) {
						if rng.IntN(4) != 0 {
							members = append(members, ring.Member{ID: id + 1, Weight: []float64{0.5, 1, 1, 2}[rng.IntN(4)]})
						}
					}
					e.SetMembers(members)
				case op < 9:
					if len(members) > 0 && len(e.keys) > 0 {
						node := members[rng.IntN(len(members))].ID
						e.HandBack(node, pick(tt.keys/10)...)
					}
				default:
					for _, d := range e.Decisions() {
						if d.Kind != Assign {
							continue
						}
						switch rng.IntN(3) {
						case 0:
							e.Confirm(d.Node, d.Key)
						case 1:
							// The node retries on its own and
							// answers at the end.
							e.CloneFailed(d.Node, d.Key)
							unanswered = append(unanswered, d)
						default:
							unanswered = append(unanswered, d)
						}
					}
				}
				if catalog && e.ring != nil {
					if e.placements == before {
						incremental++
					} else {
						recomputed++
					}
				}
				checkPlacement(t, e, step)
			}
			t.Logf("catalog changes: %d incremental, %d placed every key", incremental, recomputed)
			if tt.wantIncremental && incremental == 0 {
				t.Error("no catalog change was applied incrementally")
			}
			if tt.wantRecomputed && recomputed == 0 {
				t.Error("no catalog change placed every key again: the fallback went untested")
			}

			keys := slices.Sorted(maps.Keys(present))
			for _, k := range slices.Concat(universe, []repokey.Key{"never/added"}) {
				if _, _, ok := e.Owner(k); ok != present[k] {
					t.Errorf("Owner(%q) known=%v, want %v", k, ok, present[k])
				}
			}

			// An engine restored from a snapshot has the same owners,
			// targets and desired owners.
			r, err := Restore(cfg, e.Snapshot(), keys)
			if err != nil {
				t.Fatal(err)
			}
			r.SetMembers(members)
			for _, k := range keys {
				o1, t1, ok1 := e.Owner(k)
				o2, t2, ok2 := r.Owner(k)
				if !ok1 || !ok2 || o1 != o2 || t1 != t2 {
					t.Fatalf("key %q: owner/target %d/%d (known %v), restored %d/%d (known %v)", k, o1, t1, ok1, o2, t2, ok2)
				}
				if w1, w2 := wantOf(e, k), wantOf(r, k); w1 != w2 {
					t.Fatalf("key %q: desired owner %d, restored %d", k, w1, w2)
				}
			}
			if !maps.Equal(e.Load(), r.Load()) {
				t.Fatalf("load %v, restored %v", e.Load(), r.Load())
			}

			// A fresh engine given the final members, keys and overrides
			// has the same desired owners, and settles on them.
			f := New(cfg)
			f.AddKeys(keys...)
			f.overrides = map[repokey.Key][]uint32{}
			for k, ex := range e.overrides {
				f.overrides[k] = slices.Clone(ex)
			}
			f.SetMembers(members)
			for _, k := range keys {
				if w1, w2 := wantOf(e, k), wantOf(f, k); w1 != w2 {
					t.Fatalf("key %q: desired owner %d, on a fresh engine %d", k, w1, w2)
				}
			}
			for _, d := range unanswered {
				e.Confirm(d.Node, d.Key)
			}
			settle(t, e)
			settle(t, f)
			if e.ring != nil && e.PendingMoves() != 0 {
				t.Fatalf("%d moves pending after settling", e.PendingMoves())
			}
			if d := changed(owners(t, e, keys), owners(t, f, keys)); d != 0 {
				t.Errorf("%d of %d keys have other owners than on a fresh engine", d, len(keys))
			}
		})
	}
}

func wantOf(e *Engine, key repokey.Key) uint32 {
	i, _ := e.index.get(e.keys, key)
	return e.want(i)
}

func TestSmallCatalogChangesDoNotPlaceEveryKeyAgain(t *testing.T) {
	keys := testKeys(50_100)
	e := New(Config{})
	e.AddKeys(keys[:50_000]...)
	e.SetMembers(equalMembers(span(1, 20)...))
	settle(t, e)
	before := e.placements
	if !e.plain {
		t.Fatal("no member near its bound, yet the placement is not known to be plain")
	}

	e.AddKeys(keys[50_000:]...)
	ds := e.Decisions()
	if got := count(ds, Assign); got != 100 {
		t.Errorf("adding 100 keys: %d assigns, want 100", got)
	}
	for _, d := range ds {
		if id, _ := e.ring.Lookup(string(d.Key)); d.Node != id || d.From != 0 || d.Urgent {
			t.Errorf("new key assigned as %+v, want to its consistent-hash owner %d, not urgent, from nobody", d, id)
		}
	}
	settle(t, e)
	e.RemoveKeys(keys[:100]...)
	if got := count(e.Decisions(), Drop); got != 100 {
		t.Errorf("removing 100 keys: %d drops, want 100", got)
	}
	if e.placements != before {
		t.Errorf("small catalog changes placed every key again %d times", e.placements-before)
	}
	checkPlacement(t, e, 0)
}

func TestACatalogChangeThatReachesABoundPlacesEveryKeyAgain(t *testing.T) {
	e := New(Config{VnodesPerWeight: 10, LoadFactor: 1.5})
	e.SetMembers(equalMembers(1, 2))
	// Keys by their consistent-hash owner.
	var on1, on2 []repokey.Key
	for _, k := range testKeys(1000) {
		if id, _ := e.ring.Lookup(string(k)); id == 1 {
			on1 = append(on1, k)
		} else {
			on2 = append(on2, k)
		}
	}
	e.AddKeys(on2[:2]...)
	// Member 1's bound is ceil(1.5 * n/2): adding keys of member 1 alone
	// fits while n-2 <= that, up to n = 11; the 12th key goes over.
	for i, k := range on1[:10] {
		before := e.placements
		e.AddKeys(k)
		checkPlacement(t, e, i)
		if got, want := e.placements != before, i == 9; got != want {
			t.Fatalf("adding key %d of member 1 (%d keys): placed every key again %v, want %v", i, len(e.keys), got, want)
		}
	}
	if e.plain {
		t.Fatal("a key is displaced by the bound, yet the placement is plain")
	}
	// Removing them: plain again once member 1 is below its bound.
	for i, k := range on1[:10] {
		e.RemoveKeys(k)
		checkPlacement(t, e, i)
		if want := len(e.keys) <= 7; e.plain != want {
			t.Fatalf("%d keys left: plain %v, want %v", len(e.keys), e.plain, want)
		}
	}
}
