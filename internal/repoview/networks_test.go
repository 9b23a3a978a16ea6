package repoview

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A network's listing, alone or with the other filters, agrees with a
// naive filter of every repository while repositories join, leave and
// change networks, states and owners, and come and go; the view keeps an
// index only for the networks that have members, and one copy of each
// network's name.
func TestNetworkListingAgreesWithANaiveFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	view, counts := New()
	var all SortedIndex
	model := map[repokey.Key]*fleetv1.RepoState{}
	keys := make([]repokey.Key, 400)
	for i := range keys {
		keys[i] = repokey.Key(fmt.Sprintf("host%d.example/g%d/r%d", i%3, i%7, i))
	}
	networks := append(slices.Clone(testNetworks), "") // "": none
	filterNetworks := append(slices.Clone(testNetworks), "no-members")
	states := []repostate.State{repostate.OK, repostate.Pending, repostate.Failing}
	set := func(k repokey.Key) {
		st, ok := model[k]
		if !ok {
			counts.Set(k, Class{}, false)
			return
		}
		s, _ := repostate.Parse(st.GetState())
		counts.Set(k, Class{State: s, Owner: st.GetOwner()}, true)
	}
	for round := range 6000 {
		k := keys[rng.IntN(len(keys))]
		if rng.IntN(5) == 0 {
			if _, ok := view.Del(k); ok {
				all.Remove(k)
			}
			delete(model, k)
		} else {
			st := &fleetv1.RepoState{Key: string(k), State: states[rng.IntN(len(states))].String(), Owner: uint32(1 + rng.IntN(3)),
				Network: networks[rng.IntN(len(networks))]}
			if _, had := put(view, st); !had {
				all.Add(k)
			}
			model[k] = st
		}
		set(k)
		if round%5 != 0 {
			continue
		}
		f := Filter{Network: filterNetworks[rng.IntN(len(filterNetworks))], Offset: rng.IntN(40), Limit: rng.IntN(30)}
		if rng.IntN(3) == 0 {
			f.State = new(states[rng.IntN(len(states))])
		}
		if rng.IntN(3) == 0 {
			f.Owner = uint32(rng.IntN(4))
		}
		if rng.IntN(3) == 0 {
			f.Prefix = []string{"host1.example/", "host2.example/g3/", "nohost/"}[rng.IntN(3)]
		}
		page, total := counts.List(all.Of(view), view, f)
		want, wantTotal := naiveList(model, f)
		var got []repokey.Key
		for _, p := range page {
			got = append(got, p.Key)
			if p.State.GetNetwork() != f.Network {
				t.Fatalf("round %d: %s listed in network %q, not %q", round, p.Key, p.State.GetNetwork(), f.Network)
			}
		}
		if total != wantTotal || !slices.Equal(got, want) {
			t.Fatalf("round %d, filter %+v: got %d of %d %v, want %d of %d %v", round, f, len(got), total, got, len(want), wantTotal, want)
		}
	}
	if rebuilt := view.NetworksRebuilt(); len(rebuilt) != 0 {
		t.Fatalf("network indexes lost track of their keys: %v", rebuilt)
	}
	members := map[string]int{}
	for _, st := range model {
		if st.GetNetwork() != "" {
			members[st.GetNetwork()]++
		}
	}
	if got := len(view.nets); got != len(members) {
		t.Errorf("the view indexes %d networks (%v), want the %d with members", got, slices.Collect(maps.Keys(view.nets)), len(members))
	}
	for k := range model {
		v, _ := view.Entry(k)
		if name := v.Network(); name != "" && unsafe.StringData(name) != unsafe.StringData(view.nets[name].name) {
			t.Fatalf("%s keeps a copy of its network's name %q of its own", k, name)
		}
	}
}
