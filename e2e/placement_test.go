package e2e

import (
	"cmp"
	"slices"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// A repository's key holds the port of the test's git server, which
// changes from run to run, and the coordinator places keys by hashing them:
// which node is given which repository is chance. A test whose point needs
// a node to be given repositories (to hand back, to refuse, to be revoked
// with) computes a catalog in which it is, with the coordinator's own
// placement engine, rather than hope for one.

// membersOf is the placement members that nodes with the IDs ids make,
// each with the weight of a node started without --capacity. A fresh
// coordinator gives the nodes that register the IDs 1, 2, 3, ... in the
// order they come (membership.AllocateID), so a test that starts nodes
// together knows the IDs they will have, not which node has which.
func membersOf(ids ...uint32) []ring.Member {
	w := config.Default().Capacity
	ms := make([]ring.Member, 0, len(ids))
	for _, id := range ids {
		ms = append(ms, ring.Member{ID: id, Weight: w})
	}
	slices.SortFunc(ms, func(a, b ring.Member) int { return cmp.Compare(a.ID, b.ID) })
	return ms
}

// placedOn returns the keys the coordinator places on each of members when
// its catalog holds keys: package placement's engine with the
// coordinator's defaults, which the e2e fleets do not change.
func placedOn(keys []string, members []ring.Member) map[uint32][]string {
	d := config.Default()
	e := placement.New(placement.Config{LoadFactor: d.LoadFactor, MaxInFlight: d.MaxClonesInFlight})
	ks := make([]repokey.Key, len(keys))
	for i, k := range keys {
		ks[i] = repokey.Key(k)
	}
	e.AddKeys(ks...)
	e.SetMembers(members)
	out := map[uint32][]string{}
	for _, k := range keys {
		if _, target, ok := e.Owner(repokey.Key(k)); ok && target != 0 {
			out[target] = append(out[target], k)
		}
	}
	return out
}

// reposPlacing returns repos 0..n-1 for the smallest n >= from such that,
// once writeCatalog lists them (with its missing upstream), each member of
// each member set in sets is placed at least least of them. The sets are
// every membership the test's nodes can end up with.
func (f *fleet) reposPlacing(from, least int, sets ...[]ring.Member) []int {
	f.t.Helper()
	for n := from; n < from+100; n++ {
		repos := seq(0, n)
		if f.eachPlaced(repos, least, sets) {
			f.t.Logf("%d repositories: each node is placed at least %d of them", n, least)
			return repos
		}
	}
	f.t.Fatalf("no catalog of %d to %d repositories places %d on each member of %v", from, from+99, least, sets)
	return nil
}

func (f *fleet) eachPlaced(repos []int, least int, sets [][]ring.Member) bool {
	upstream := map[string]bool{} // the catalog's missing upstream is not one
	for _, i := range repos {
		upstream[f.key(i)] = true
	}
	for _, ms := range sets {
		on := placedOn(f.catalogKeys(repos), ms)
		for _, m := range ms {
			n := 0
			for _, k := range on[m.ID] {
				if upstream[k] {
					n++
				}
			}
			if n < least {
				return false
			}
		}
	}
	return true
}

// placedAsComputed fails the test unless members, the membership the
// nodes registered with, is one of the sets its catalog was computed for.
func (f *fleet) placedAsComputed(members []ring.Member, sets ...[]ring.Member) {
	f.t.Helper()
	for _, ms := range sets {
		if slices.Equal(ms, members) {
			return
		}
	}
	f.t.Fatalf("the nodes registered as %v, not as one of %v, for which the catalog was computed", members, sets)
}
