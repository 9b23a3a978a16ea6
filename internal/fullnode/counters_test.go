package fullnode

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// recount is what the counters stand for: every repository as the API
// shows it, counted.
func recount(f *Node) (repos []api.Repo, byState map[repostate.State]int, current int) {
	f.mu.Lock()
	view := map[string]*fleetv1.RepoState{}
	for k := range f.view.Keys() {
		view[string(k)] = f.view.Get(k)
	}
	f.mu.Unlock()
	now := f.clk.Now()
	byState = map[repostate.State]int{}
	for k, st := range view {
		r := f.backend.repo(repokey.Key(k), st, now)
		repos = append(repos, r)
		byState[r.State]++
		if r.Current {
			current++
		}
	}
	slices.SortFunc(repos, func(a, b api.Repo) int { return strings.Compare(a.Key, b.Key) })
	return repos, byState, current
}

// The counters and the per-state, per-owner and per-network listings agree
// with a full recount after a random sequence of state changes (networks
// among them), removals, digests, mirrors appearing and going, and
// broken-state overrides.
func TestCountersAgreeWithARecount(t *testing.T) {
	f := benchFullNode(t, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprintf("host%d.example/g%d/r%d", i%3, i%7, i)
	}
	states := []string{"ok", "pending", "failing"}
	digests := []string{"", "d1", "d2"}
	networks := []string{"", "", "linux", "root:0123456789abcdef0123456789abcdef01234567"}
	randState := func(k string) *fleetv1.RepoState {
		return &fleetv1.RepoState{Key: k, State: states[rng.IntN(3)], Owner: uint32(1 + rng.IntN(4)), Digest: digests[rng.IntN(3)],
			Network: networks[rng.IntN(len(networks))]}
	}
	for round := range 3000 {
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(8) {
		case 0, 1:
			var rs []*fleetv1.RepoState
			for range 1 + rng.IntN(20) {
				rs = append(rs, randState(keys[rng.IntN(len(keys))]))
			}
			f.states(rs)
		case 2:
			f.removed(context.Background(), []string{k})
		case 3:
			f.n.SetDigest(repokey.Key(k), digests[rng.IntN(3)])
		case 4:
			f.n.ForgetDigest(repokey.Key(k))
		case 5:
			switch rng.IntN(3) {
			case 0:
				f.n.TestHooks().SetWhole(repokey.Key(k))
			case 1:
				f.n.TestHooks().SetBroken(repokey.Key(k), repostate.Corrupt)
			case 2:
				f.n.TestHooks().SetBroken(repokey.Key(k), repostate.Repairing)
			}
		case 6: // a mirror cloned: on disk, then its digest noted
			if err := os.MkdirAll(f.mirror.Path(repokey.Key(k)), 0o755); err != nil {
				t.Fatal(err)
			}
			f.n.SetDigest(repokey.Key(k), digests[1+rng.IntN(2)])
		case 7: // a mirror deleted, then its digest forgotten
			if err := os.RemoveAll(f.mirror.Path(repokey.Key(k))); err != nil {
				t.Fatal(err)
			}
			f.n.ForgetDigest(repokey.Key(k))
		}
		if round%10 != 0 {
			continue
		}
		repos, byState, current := recount(f)
		got := f.totals()
		if got.total != len(repos) || got.current != current || !maps.Equal(got.byState, byState) {
			t.Fatalf("round %d: counters %+v, a recount: total %d current %d by state %v", round, got, len(repos), current, byState)
		}
		filter := api.RepoFilter{Offset: rng.IntN(10), Limit: rng.IntN(30)}
		if rng.IntN(3) > 0 {
			filter.State = new([]repostate.State{repostate.OK, repostate.Pending, repostate.Failing, repostate.Corrupt, repostate.Repairing, repostate.Gone}[rng.IntN(6)])
		}
		if rng.IntN(2) == 0 {
			filter.Owner = uint32(rng.IntN(5))
		}
		if rng.IntN(2) == 0 {
			filter.Prefix = []string{"host1.example/", "host2.example/g3/", "nohost/"}[rng.IntN(3)]
		}
		if rng.IntN(3) == 0 {
			filter.Network = []string{"linux", networks[3], "no-members"}[rng.IntN(3)]
		}
		var want []string
		wantTotal := 0
		for _, r := range repos {
			if strings.HasPrefix(r.Key, filter.Prefix) && (filter.State == nil || r.State == *filter.State) && (filter.Owner == 0 || r.Owner == filter.Owner) &&
				(filter.Network == "" || r.Network == filter.Network) {
				if wantTotal >= filter.Offset && (filter.Limit <= 0 || len(want) < filter.Limit) {
					want = append(want, r.Key)
				}
				wantTotal++
			}
		}
		page, total := f.backend.ListRepos(t.Context(), filter)
		var gotKeys []string
		for _, r := range page {
			gotKeys = append(gotKeys, r.Key)
		}
		if total != wantTotal || !slices.Equal(gotKeys, want) {
			t.Fatalf("round %d, filter %+v: got %d of %d %v, want %d of %d %v", round, filter, len(gotKeys), total, gotKeys, len(want), wantTotal, want)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rebuiltStates, rebuiltOwners := f.counts.Rebuilt()
	for s, rebuilt := range rebuiltStates {
		if rebuilt != 0 {
			t.Fatalf("the index of state %s lost track of its keys %d times", s, rebuilt)
		}
	}
	for o, rebuilt := range rebuiltOwners {
		if rebuilt != 0 {
			t.Fatalf("the index of owner %d lost track of its keys %d times", o, rebuilt)
		}
	}
	for n, rebuilt := range f.view.NetworksRebuilt() {
		t.Fatalf("the index of network %q lost track of its keys %d times", n, rebuilt)
	}
}
