package placement

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// testNetworks puts keys into networks of the given sizes, from the front
// of keys, named net0, net1, ...
func testNetworks(keys []repokey.Key, sizes ...int) map[repokey.Key]string {
	nets := map[repokey.Key]string{}
	at := 0
	for n, size := range sizes {
		for range size {
			nets[keys[at]] = fmt.Sprintf("net%d", n)
			at++
		}
	}
	return nets
}

// poolOwners returns the owners of each pool's keys, by pool.
func poolOwners(t *testing.T, e *Engine, keys []repokey.Key) map[string]map[uint32]int {
	t.Helper()
	out := map[string]map[uint32]int{}
	for _, k := range keys {
		_, pool, _ := e.Network(k)
		if pool == "" {
			continue
		}
		o, _, _ := e.Owner(k)
		if out[pool] == nil {
			out[pool] = map[uint32]int{}
		}
		out[pool][o]++
	}
	return out
}

func TestEveryMemberOfANetworkHasTheSameOwner(t *testing.T) {
	keys := testKeys(3000)
	nets := testNetworks(keys, 2, 5, 20, 50, 200)
	e := New(fewVnodes)
	e.SetNetworks(nets)
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(span(1, 5)...))
	settle(t, e)
	pools := poolOwners(t, e, keys)
	if len(pools) != 5 {
		t.Fatalf("%d pools, want 5: %v", len(pools), pools)
	}
	for pool, os := range pools {
		if len(os) != 1 {
			t.Errorf("network %s is owned by several nodes: %v", pool, os)
		}
	}
	for _, k := range keys[:5] {
		if name, pool, parts := e.Network(k); name == "" || pool != name || parts != 1 {
			t.Errorf("Network(%q) = %q, %q, %d; want a whole network", k, name, pool, parts)
		}
	}
	if name, pool, parts := e.Network(keys[len(keys)-1]); name != "" || pool != "" || parts != 0 {
		t.Errorf("a standalone key is in network %q, pool %q, parts %d", name, pool, parts)
	}
	bound := e.bound(0, len(keys))
	for id, n := range e.Load() {
		if n > bound {
			t.Errorf("node %d holds %d keys, over its bound %d", id, n, bound)
		}
	}
}

func TestANetworkMovesWholeMakeBeforeBreak(t *testing.T) {
	keys := testKeys(2000)
	nets := testNetworks(keys, 100, 100, 100, 100, 100, 100)
	e := New(fewVnodes)
	e.SetNetworks(nets)
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(span(1, 4)...))
	settle(t, e)
	before := poolOwners(t, e, keys)

	e.SetMembers(equalMembers(span(1, 6)...)) // two nodes join
	ds := e.Decisions()
	// Every move of a network's members goes to one node.
	targets := map[string]map[uint32]bool{}
	for _, d := range ds {
		if d.Kind == Drop {
			t.Fatalf("%s dropped from node %d before its new owner confirmed", d.Key, d.Node)
		}
		if name, _, _ := e.Network(d.Key); name != "" {
			if targets[name] == nil {
				targets[name] = map[uint32]bool{}
			}
			targets[name][d.Node] = true
		}
	}
	for _, k := range keys {
		_, tgt, _ := e.Owner(k)
		if name, _, _ := e.Network(k); name != "" && tgt != 0 {
			targets[name][tgt] = true
		}
	}
	moved := 0
	for name, ts := range targets {
		if len(ts) != 1 {
			t.Errorf("network %s moves to several nodes: %v", name, ts)
		}
		moved++
	}
	if moved == 0 {
		t.Log("no network moved with these members; the test shows nothing about moves")
	}
	// Confirm everything: each old owner is told to drop only once the
	// new owner confirmed, and the networks are whole again.
	for _, d := range ds {
		if d.Kind == Assign {
			if o, _, _ := e.Owner(d.Key); o == d.Node {
				t.Fatalf("%s owned by its target before it confirmed", d.Key)
			}
			e.Confirm(d.Node, d.Key)
		}
	}
	settle(t, e)
	after := poolOwners(t, e, keys)
	for pool, os := range after {
		if len(os) != 1 {
			t.Errorf("network %s is owned by several nodes after the move: %v", pool, os)
		}
	}
	if len(before) != len(after) {
		t.Errorf("pools before %v, after %v", before, after)
	}
}

func TestANetworkTooLargeForANodeIsSplitIntoParts(t *testing.T) {
	keys := testKeys(1000)
	nets := testNetworks(keys, 600) // more than half of any node's bound
	e := New(fewVnodes)
	e.SetNetworks(nets)
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(1, 2, 3))
	settle(t, e)
	_, _, parts := e.Network(keys[0])
	if parts < 2 {
		t.Fatalf("a network of 600 of 1000 keys over 3 nodes has %d part(s)", parts)
	}
	pools := poolOwners(t, e, keys)
	if len(pools) != parts {
		t.Fatalf("%d pools for %d parts: %v", len(pools), parts, pools)
	}
	for pool, os := range pools {
		if len(os) != 1 {
			t.Errorf("part %s is owned by several nodes: %v", pool, os)
		}
		if pool[:5] != "net0#" {
			t.Errorf("a part's pool is %q, want net0#N", pool)
		}
	}
	// A single node holds the whole network: nothing to split over.
	one := New(fewVnodes)
	one.SetNetworks(nets)
	one.AddKeys(keys...)
	one.SetMembers(equalMembers(1))
	if _, pool, parts := one.Network(keys[0]); parts != 1 || pool != "net0" {
		t.Errorf("on one node: pool %q, %d parts; want net0 whole", pool, parts)
	}
}

// placesOf returns every key's placement.
func placesOf(e *Engine) map[repokey.Key]uint32 {
	out := make(map[repokey.Key]uint32, len(e.keys))
	for _, k := range e.keys {
		out[k.key] = k.place
	}
	return out
}

// TestNetworkChangesPlaceAsPlacingFromScratch plays random catalog and
// network changes and checks after each that the placement is what a fresh
// engine given the same keys, networks and members computes: a pure
// function of its inputs, whatever their order.
func TestNetworkChangesPlaceAsPlacingFromScratch(t *testing.T) {
	for _, share := range []float64{0, 0.02} { // 0.02: networks split often
		for seed := range uint64(4) {
			rng := rand.New(rand.NewPCG(seed, 24))
			universe := testKeys(600)
			in := map[repokey.Key]bool{}
			nets := map[repokey.Key]string{}
			cfg := Config{VnodesPerWeight: 50, LoadFactor: 1.1, NetworkShare: share}
			e := New(cfg)
			e.SetMembers(equalMembers(1, 2, 3, 4))
			for step := range 150 {
				switch rng.IntN(5) {
				case 0, 1:
					var add []repokey.Key
					for range rng.IntN(30) {
						k := universe[rng.IntN(len(universe))]
						add = append(add, k)
						in[k] = true
					}
					e.AddKeys(add...)
				case 2:
					var rm []repokey.Key
					for range rng.IntN(20) {
						k := universe[rng.IntN(len(universe))]
						rm = append(rm, k)
						delete(in, k)
					}
					e.RemoveKeys(rm...)
				case 3:
					change := map[repokey.Key]string{}
					for range rng.IntN(40) {
						k := universe[rng.IntN(len(universe))]
						name := ""
						if rng.IntN(4) != 0 {
							name = fmt.Sprintf("n%d", rng.IntN(6))
						}
						change[k] = name
						if name == "" {
							delete(nets, k)
						} else {
							nets[k] = name
						}
					}
					e.SetNetworks(change)
				case 4:
					e.SetMembers(equalMembers(span(1, uint32(2+rng.IntN(4)))...))
				}
				settle(t, e)
				fresh := New(cfg)
				fresh.SetMembers(e.members)
				fresh.SetNetworks(nets)
				fresh.AddKeys(slices.Sorted(maps.Keys(in))...)
				if got, want := placesOf(e), placesOf(fresh); !maps.Equal(got, want) {
					t.Fatalf("share %g seed %d step %d: placement differs from a fresh engine's", share, seed, step)
				}
				for pool, os := range poolOwners(t, e, universe) {
					if len(os) != 1 {
						t.Fatalf("share %g seed %d step %d: pool %s owned by %v", share, seed, step, pool, os)
					}
				}
				held := make([]int, len(e.members))
				for _, k := range e.keys {
					held[e.rank[k.place]]++
				}
				if !slices.Equal(held, e.held) {
					t.Fatalf("step %d: held %v, counted %v", step, e.held, held)
				}
				if e.plain {
					for i := range e.keys {
						if id, _ := e.ring.Lookup(e.unit(int32(i))); id != e.keys[i].place {
							t.Fatalf("step %d: plain, but %q is not on its unit's consistent-hash owner", step, e.keys[i].key)
						}
					}
				}
			}
		}
	}
}

func TestSmallNetworkChangesDoNotPlaceEveryKeyAgain(t *testing.T) {
	keys := testKeys(20000)
	e := New(Config{})
	e.SetNetworks(testNetworks(keys, 50, 50, 100))
	e.AddKeys(keys...)
	e.SetMembers(equalMembers(span(1, 10)...))
	settle(t, e)
	before := e.placements
	for i := range 100 {
		e.SetNetworks(map[repokey.Key]string{keys[1000+i]: "net1"})
		e.AddKeys(repokey.Key(fmt.Sprintf("github.com/new/repo-%d", i)))
		e.RemoveKeys(keys[5000+i])
	}
	settle(t, e)
	if e.placements != before {
		t.Errorf("100 small changes placed every key %d times", e.placements-before)
	}
	if os := poolOwners(t, e, keys)["net1"]; len(os) != 1 {
		t.Errorf("net1 owned by %v", os)
	}
}

func TestRestartWithNetworksMovesNothing(t *testing.T) {
	keys := testKeys(3000)
	nets := testNetworks(keys, 30, 300)
	e := New(fewVnodes)
	e.SetNetworks(nets)
	e.AddKeys(keys...)
	ms := []ring.Member{{ID: 1, Weight: 1}, {ID: 2, Weight: 2}, {ID: 3, Weight: 1}}
	e.SetMembers(ms)
	settle(t, e)
	e.SetMembers(ms[:2]) // a move under way
	e.Decisions()
	r, err := RestoreNetworks(fewVnodes, e.Snapshot(), keys, nets)
	if err != nil {
		t.Fatal(err)
	}
	r.SetMembers(ms[:2])
	if ds := r.Decisions(); len(ds) != 0 {
		// Sent assigns are not sent again; queued ones may be.
		for _, d := range ds {
			if _, tgt, _ := e.Owner(d.Key); d.Kind != Assign || tgt != d.Node {
				t.Fatalf("restored engine decided %+v", d)
			}
		}
	}
	for _, k := range keys {
		o1, t1, _ := e.Owner(k)
		o2, t2, _ := r.Owner(k)
		if o1 != o2 || t1 != t2 {
			t.Fatalf("%s: owner/target %d/%d, restored %d/%d", k, o1, t1, o2, t2)
		}
	}
}

// benchNetworks puts about share of keys into networks of 2 to 200
// members, sizes spread evenly.
func benchNetworks(keys []repokey.Key, share float64) map[repokey.Key]string {
	var sizes []int
	for total, i := 0, 0; total < int(share*float64(len(keys))); i++ {
		s := 2 + i*37%199
		sizes = append(sizes, s)
		total += s
	}
	return testNetworks(keys, sizes...)
}

// BenchmarkNetworks1M places 1,000,000 keys, 10% of them in networks of 2
// to 200 members, over 100 equal members from scratch (place), and on the
// settled engine adds 100 keys to networks and removes them again, with
// the decisions they lead to (change), as BenchmarkAddKeys100 does for
// standalone keys.
func BenchmarkNetworks1M(b *testing.B) {
	keys := testKeys(benchKeys() + 100)
	nets := benchNetworks(keys[:benchKeys()], 0.10)
	ms := equalMembers(span(1, 100)...)
	b.Run("place", func(b *testing.B) {
		for b.Loop() {
			e := New(Config{})
			e.SetNetworks(nets)
			e.AddKeys(keys[:benchKeys()]...)
			e.SetMembers(ms)
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/place")
	})
	b.Run("change", func(b *testing.B) {
		e := New(Config{})
		e.SetNetworks(nets)
		added := keys[benchKeys():]
		join := map[repokey.Key]string{}
		for i, k := range added {
			join[k] = nets[keys[i*997%benchKeys()]] // spread over the networks
			if join[k] == "" {
				join[k] = "net1"
			}
		}
		e.SetNetworks(join)
		e.AddKeys(keys[:benchKeys()]...)
		e.SetMembers(ms)
		settle(b, e)
		before := e.placements
		for b.Loop() {
			e.AddKeys(added...)
			if count(e.Decisions(), Assign) < len(added) {
				b.Fatal("adding keys: fewer assigns than keys")
			}
			e.RemoveKeys(added...)
			e.Decisions()
		}
		changes := float64(2 * b.N)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/changes, "ns/change")
		b.ReportMetric(float64(e.placements-before)/changes, "placed_all/change")
	})
}
