package e2e

import (
	"fmt"
	"testing"
	"time"
)

// clones counts the mirrors a node cloned, from its log.
func clones(p *proc) int { return p.count("cloned=true") }

func owners(f *fleet, repos []int) (map[string]uint32, error) {
	api, err := apiRepos(f.base)
	if err != nil {
		return nil, err
	}
	out := map[string]uint32{}
	for _, i := range repos {
		r, ok := api[f.key(i)]
		if !ok || r.Owner == 0 {
			return nil, fmt.Errorf("%s not placed", f.key(i))
		}
		out[f.key(i)] = r.Owner
	}
	return out, nil
}

func TestRestartsMoveNothingAndCloneNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 12)
	f.seed(repos, "12 repositories")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr)
	f.startNode("partial-1", "partial")
	f.startNode("partial-2", "partial")
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	before, err := owners(f, repos)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("coordinator restarted: no owner changes, nothing re-cloned", func(t *testing.T) {
		// The clones counted before the restart: one that the sessions'
		// return would cause counts however soon it comes.
		p1, p2 := f.procs["partial-1"], f.procs["partial-2"]
		c1, c2 := clones(p1), clones(p2)
		if c1+c2 == 0 {
			t.Fatal("the partial nodes' logs show no clones at all: the count below would prove nothing")
		}
		f.procs["coordinator"].kill()
		f.startCoordinator()
		time.Sleep(3 * time.Second) // sessions come back and assignments are re-sent
		if _, err := f.up.Commit(f.name(3), "main"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "updates flow after the restart", func() error { return f.servedLikeUpstream(repos) })
		nothingMovedOrRecloned(t, f, repos, before, p1, p2, c1, c2, "a coordinator restart")
	})

	t.Run("partial node restarted within grace: nothing re-cloned", func(t *testing.T) {
		f.procs["partial-2"].kill()
		f.startNode("partial-2", "partial")
		if _, err := f.up.Commit(f.name(4), "main"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "updates flow after the node restart", func() error { return f.servedLikeUpstream(repos) })
		time.Sleep(2 * time.Second)
		if n := clones(f.procs["partial-2"]); n != 0 {
			t.Errorf("the restarted node cloned %d repositories it already had", n)
		}
		after, err := owners(f, repos)
		if err != nil {
			t.Fatal(err)
		}
		for k, o := range before {
			if after[k] != o {
				t.Errorf("%s moved from node %d to %d across a node restart within grace", k, o, after[k])
			}
		}
	})
}

// nothingMovedOrRecloned checks that every repository has the owner it had
// in before, and that partial nodes p1 and p2 have cloned nothing since
// they had c1 and c2 clones.
func nothingMovedOrRecloned(t *testing.T, f *fleet, repos []int, before map[string]uint32, p1, p2 *proc, c1, c2 int, across string) {
	t.Helper()
	after, err := owners(f, repos)
	if err != nil {
		t.Fatal(err)
	}
	for k, o := range before {
		if after[k] != o {
			t.Errorf("%s moved from node %d to %d across %s", k, o, after[k], across)
		}
	}
	if clones(p1) != c1 || clones(p2) != c2 {
		t.Errorf("re-clones after %s: partial-1 %d->%d, partial-2 %d->%d", across, c1, clones(p1), c2, clones(p2))
	}
}
