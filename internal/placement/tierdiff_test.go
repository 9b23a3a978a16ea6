package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/ring"
)

// A tier changed by random diffs (units added, removed and reweighed, a
// batch at a time, now and then a member joining or leaving) places every
// unit where a tier given the same units and members from scratch does,
// after every batch; and, on even members, most batches are placed without
// placing every unit again.
func TestTierDiffsPlaceAsAFullPlacementDoes(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			// Few ring points make members uneven: the load bound then binds,
			// and diffs must place every unit again.
			vnodes := 500 + rng.IntN(2000)
			if seed%2 == 0 {
				vnodes = 20 + rng.IntN(60)
			}
			cfg := TierConfig{Replicas: 2 + int(seed/3%2), VnodesPerWeight: vnodes}
			members := make([]ring.Member, 3+rng.IntN(5))
			for i := range members {
				members[i] = ring.Member{ID: uint32(i + 1), Weight: 1}
			}
			tier := NewTier(cfg)
			tier.SetMembers(members)
			units := map[string]int{}
			next := 0
			weight := func() int {
				if rng.IntN(200) == 0 {
					return 1 + rng.IntN(50) // a large network
				}
				return 1 + rng.IntN(3)
			}
			for range 3000 {
				units[fmt.Sprintf("u%d", next)] = weight()
				tier.SetUnit(fmt.Sprintf("u%d", next), units[fmt.Sprintf("u%d", next)])
				next++
			}
			confirmAll(tier, tier.Decisions())
			placings := tier.placings
			const batches = 60
			for b := range batches {
				switch r := rng.IntN(30); {
				case r == 0 && len(members) > cfg.Replicas+1:
					i := rng.IntN(len(members))
					members = slices.Delete(slices.Clone(members), i, i+1)
					tier.SetMembers(members)
					placings++
				case r == 1:
					members = append(slices.Clone(members), ring.Member{ID: uint32(100 + b), Weight: 1})
					tier.SetMembers(members)
					placings++
				}
				for range 1 + rng.IntN(8) {
					names := slices.Sorted(func(yield func(string) bool) {
						for n := range units {
							if !yield(n) {
								return
							}
						}
					})
					switch op := rng.IntN(3); {
					case op == 0 || len(names) < 2000:
						n := fmt.Sprintf("u%d", next)
						next++
						units[n] = weight()
						tier.SetUnit(n, units[n])
					case op == 1:
						n := names[rng.IntN(len(names))]
						delete(units, n)
						tier.SetUnit(n, 0)
					default:
						n := names[rng.IntN(len(names))]
						units[n] = weight()
						tier.SetUnit(n, units[n])
					}
				}
				confirmAll(tier, tier.Decisions())

				fresh := NewTier(cfg)
				for n, w := range units {
					fresh.SetUnit(n, w)
				}
				fresh.SetMembers(members)
				fresh.Decisions()
				if tier.Len() != len(units) {
					t.Fatalf("batch %d: the tier has %d units, want %d", b, tier.Len(), len(units))
				}
				for n := range units {
					got, held, _ := tier.ReplicasOf(n)
					want, _, _ := fresh.ReplicasOf(n)
					if !slices.Equal(got, want) {
						t.Fatalf("batch %d: %s on %v after the diffs, %v placed from scratch", b, n, got, want)
					}
					if !tier.Everyone() && !sameSet(held, got) {
						t.Fatalf("batch %d: %s confirmed on %v, want %v", b, n, held, got)
					}
				}
			}
			if full := tier.placings - placings; vnodes >= 500 && full > batches/2 {
				t.Errorf("%d of %d batches of diffs placed every unit again, want most placed alone with even members", full, batches)
			}
			t.Logf("%d of %d batches placed every unit again", tier.placings-placings, batches)
		})
	}
}

// With no more members than replicas the tier places nothing: every
// member holds every unit, and Where answers for units it was never given.
func TestTierWithEveryoneHoldingEverythingPlacesNothing(t *testing.T) {
	tier := NewTier(TierConfig{Replicas: 2})
	tier.SetMembers(equal(2))
	for i := range 1000 {
		tier.SetUnit(fmt.Sprintf("u%d", i), 1)
	}
	if ds := tier.Decisions(); len(ds) != 0 || tier.placings != 0 {
		t.Fatalf("%d decisions, %d placings with 2 members and 2 replicas, want none", len(ds), tier.placings)
	}
	for _, u := range []string{"u1", "never-given"} {
		if got := tier.Where(u); !sameSet(got, []uint32{1, 2}) {
			t.Errorf("%s: replicas %v, want both members", u, got)
		}
	}
	if h := tier.Held(); h[1] != [2]int{1000, 1000} || h[2] != [2]int{1000, 1000} {
		t.Errorf("held %v, want every unit on each member", h)
	}
}

// A unit whose weight puts its plain replicas over their bound is placed
// with every unit again, as from scratch; removing it lets the tier place
// units alone once more.
func TestTierDiffOverTheBoundPlacesEveryUnitAgain(t *testing.T) {
	tier := NewTier(TierConfig{})
	units := map[string]int{}
	for i := range 2000 {
		units[fmt.Sprintf("u%d", i)] = 1
		tier.SetUnit(fmt.Sprintf("u%d", i), 1)
	}
	tier.SetMembers(equal(5))
	confirmAll(tier, tier.Decisions())
	for _, step := range []struct {
		name   string
		weight int
		full   bool
	}{{"heavy", 600, true}, {"heavy", 0, true}, {"light", 1, false}} {
		before := tier.placings
		units[step.name] = step.weight
		tier.SetUnit(step.name, step.weight)
		if step.weight == 0 {
			delete(units, step.name)
		}
		confirmAll(tier, tier.Decisions())
		fresh := NewTier(TierConfig{})
		for n, w := range units {
			fresh.SetUnit(n, w)
		}
		fresh.SetMembers(equal(5))
		fresh.Decisions()
		for n := range units {
			got, _, _ := tier.ReplicasOf(n)
			want, _, _ := fresh.ReplicasOf(n)
			if !slices.Equal(got, want) {
				t.Fatalf("%s of weight %d: %s on %v, %v placed from scratch", step.name, step.weight, n, got, want)
			}
		}
		if full := tier.placings > before; full != step.full {
			t.Errorf("%s of weight %d: placed every unit again: %v, want %v", step.name, step.weight, full, step.full)
		}
	}
}

// sameSet reports whether a and b hold the same members.
func sameSet(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
