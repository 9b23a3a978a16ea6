package repoview

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
	"google.golang.org/protobuf/proto"
)

func testView(n int, rng *rand.Rand) map[repokey.Key]*fleetv1.RepoState {
	view := make(map[repokey.Key]*fleetv1.RepoState, n)
	states := []string{"ok", "pending", "failing"}
	for i := range n {
		k := repokey.Key(fmt.Sprintf("host%d.example/g%d/r%d", rng.IntN(3), rng.IntN(20), i))
		view[repokey.Key(k)] = &fleetv1.RepoState{Key: string(k), Owner: uint32(1 + rng.IntN(4)), State: states[rng.IntN(len(states))]}
	}
	return view
}

// tableOf is the full node's table of view.
func tableOf(view map[repokey.Key]*fleetv1.RepoState) *View {
	t := newView(nil)
	for k, st := range view {
		r := proto.Clone(st).(*fleetv1.RepoState)
		r.Key = string(k)
		put(t, r)
	}
	return t
}

// naiveList is what a listing means: every key in order, filtered, paged.
func naiveList(view map[repokey.Key]*fleetv1.RepoState, f Filter) (page []repokey.Key, total int) {
	var keys []repokey.Key
	for k, st := range view {
		if strings.HasPrefix(string(k), f.Prefix) && (f.Owner == 0 || st.GetOwner() == f.Owner) && (f.State == nil || st.GetState() == f.State.String()) &&
			(f.Network == "" || st.GetNetwork() == f.Network) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i >= f.Offset && (f.Limit <= 0 || len(page) < f.Limit) {
			page = append(page, k)
		}
	}
	return page, len(keys)
}

// testNetworks are the fork networks of the tests: a declared name, a
// detected one and a fork's.
var testNetworks = []string{"linux", "root:0123456789abcdef0123456789abcdef01234567", "fork:host1.example/g1/r1"}

// setNetworks puts about a third of view's keys, chosen by rng, in one of
// testNetworks.
func setNetworks(view map[repokey.Key]*fleetv1.RepoState, rng *rand.Rand) {
	for _, k := range slices.Sorted(maps.Keys(view)) {
		if rng.IntN(3) == 0 {
			view[k].Network = testNetworks[rng.IntN(len(testNetworks))]
		}
	}
}

func TestListPageAgreesWithSortingEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	view := testView(2000, rng)
	setNetworks(view, rng)
	var x SortedIndex
	for k := range view {
		x.Add(k)
	}
	prefixes := []string{"", "host1.example/", "host2.example/g1", "host0.example/g13/", "nohost/", "host"}
	filterNetworks := append(slices.Clone(testNetworks), "no-members")
	for round := range 500 {
		f := Filter{Prefix: prefixes[rng.IntN(len(prefixes))], Offset: rng.IntN(300), Limit: rng.IntN(60)}
		if rng.IntN(2) == 0 {
			f.Owner = uint32(rng.IntN(5))
		}
		if rng.IntN(2) == 0 {
			f.State = new([]repostate.State{repostate.OK, repostate.Pending, repostate.Failing, repostate.Gone}[rng.IntN(4)])
		}
		if rng.IntN(3) == 0 {
			f.Network = filterNetworks[rng.IntN(len(filterNetworks))]
		}
		// The key set changes now and then, as catalog changes do.
		if round%10 == 9 {
			for k := range view {
				if rng.IntN(100) == 0 {
					delete(view, k)
					x.Remove(k)
				}
			}
			for i := range rng.IntN(30) {
				k := repokey.Key(fmt.Sprintf("host%d.example/g1/new%d-%d", rng.IntN(3), round, i))
				if _, ok := view[k]; !ok {
					view[k] = &fleetv1.RepoState{State: "pending", Owner: 1, Network: testNetworks[i%len(testNetworks)]}
					x.Add(k)
				}
			}
			// A key that comes and goes between two listings.
			k := repokey.Key(fmt.Sprintf("host0.example/flicker%d", rng.IntN(3)))
			_, had := view[k]
			for range rng.IntN(4) {
				if had {
					delete(view, k)
					x.Remove(k)
				} else {
					view[k] = &fleetv1.RepoState{State: "ok", Owner: 2}
					x.Add(k)
				}
				had = !had
			}
		}
		tab := tableOf(view)
		page, total := listPage(x.Of(tab), tab, f)
		want, wantTotal := naiveList(view, f)
		var got []repokey.Key
		for _, p := range page {
			got = append(got, p.Key)
			if p.State.GetState() != view[p.Key].GetState() || p.State.GetOwner() != view[p.Key].GetOwner() ||
				p.State.GetNetwork() != view[p.Key].GetNetwork() {
				t.Fatalf("round %d: %s listed with another state", round, p.Key)
			}
		}
		if total != wantTotal || !slices.Equal(got, want) {
			t.Fatalf("round %d, filter %+v: got %d of %d %v, want %d of %d %v", round, f, len(got), total, got, len(want), wantTotal, want)
		}
	}
	if x.rebuilt != 0 {
		t.Fatalf("the index lost track of the key set %d times", x.rebuilt)
	}
}

// BenchmarkListPage lists the first page of 50 of 1,000,000 repositories,
// with no filter and with a state filter, once the keys are sorted; and,
// with a tenth of the keys in fork networks, the page of one network of 20
// members and of one of 10,000, alone and with a state filter (the
// network's index, as the full node lists them: Counters.List), and of the
// small one by a walk of every key (listPage), for comparison.
//
//	go test ./internal/repoview -run '^$' -bench ListPage
func BenchmarkListPage(b *testing.B) {
	view, counts := New()
	for k, st := range testView(benchsize.Of(1_000_000, 10_000), rand.New(rand.NewPCG(1, 2))) {
		st.Key = string(k)
		put(view, st)
		s, _ := repostate.Parse(st.GetState())
		counts.Set(k, Class{State: s, Owner: st.GetOwner()}, true)
	}
	var x SortedIndex
	for i, k := range x.Of(view) {
		// Every tenth key in one of 5,000 networks of 20 members, and
		// one key in 100 in a network of 10,000, spread over the keys.
		var name string
		switch {
		case i%10 == 0:
			name = fmt.Sprintf("net-%d", i/10%5000)
		case i%100 == 7:
			name = "large"
		default:
			continue
		}
		st := view.Get(k)
		st.Network = name
		put(view, st)
	}
	for _, f := range []Filter{{Limit: 50}, {Limit: 50, Offset: 500_000}, {Limit: 50, Prefix: "host1.example/g7/"}, {Limit: 50, State: new(repostate.Failing)}} {
		state := ""
		if f.State != nil {
			state = f.State.String()
		}
		b.Run(fmt.Sprintf("offset=%d,prefix=%q,state=%q", f.Offset, f.Prefix, state), func(b *testing.B) {
			for b.Loop() {
				listPage(x.Of(view), view, f)
			}
		})
	}
	for _, f := range []Filter{{Limit: 50, Network: "net-42"}, {Limit: 50, Network: "large"},
		{Limit: 50, Network: "net-42", State: new(repostate.Failing)}, {Limit: 50, Network: "large", State: new(repostate.Failing)}} {
		state := ""
		if f.State != nil {
			state = f.State.String()
		}
		b.Run(fmt.Sprintf("network=%q,state=%q", f.Network, state), func(b *testing.B) {
			for b.Loop() {
				if _, total := counts.List(x.Of(view), view, f); total == 0 && f.State == nil {
					b.Fatalf("%+v: nothing listed", f)
				}
			}
		})
	}
	b.Run(`network="net-42",walk-every-key`, func(b *testing.B) {
		for b.Loop() {
			listPage(x.Of(view), view, Filter{Limit: 50, Network: "net-42"})
		}
	})
	b.Run("merge-100-new-keys-into-1M", func(b *testing.B) {
		for b.Loop() {
			for i := range 100 {
				k := repokey.Key(fmt.Sprintf("host1.example/g3/new%d", i))
				if view.Has(k) {
					view.Del(k)
					x.Remove(k)
				} else {
					put(view, &fleetv1.RepoState{Key: string(k)})
					x.Add(k)
				}
			}
			x.Of(view)
		}
	})
}
