package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Three full nodes with --full-replicas 2 and one partial node that owns
// every repository. A full node killed with SIGKILL loses its share to the
// two others, which copy what they lack from each other over the link
// between full nodes: the upstreams see no request for a pack, the
// survivors clone and fetch nothing from the owner, and each logs its
// copies. The
// lost full node then comes back with its disk: the tier places its share
// on it again, and the survivors drop what is no longer theirs only once
// it confirmed it, so each full node ends holding exactly its share. Every
// repository clones whole, and passes fsck, through every full node.
func TestALostFullNodesShareIsCopiedFromPeersAndDroppedOnlyOnceItIsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 8)
	f.seed(repos, "8 repositories")
	f.coordArgs = []string{"--full-replicas", "2"}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	names := []string{"full-a", "full-b", "full-c"}
	bases := map[string]string{"full-a": f.base, "full-b": "http://" + freeAddr(t), "full-c": "http://" + freeAddr(t)}
	tunnels := map[string]string{"full-a": f.tunnelAddr, "full-b": freeAddr(t), "full-c": freeAddr(t)}
	startFull := func(name string) {
		f.startNode(name, "full", "--http", bases[name][len("http://"):], "--tunnel", tunnels[name], "--api-token", apiToken,
			"--capacity", "0")
	}
	for _, name := range names {
		startFull(name)
	}
	f.startNode("partial-1", "partial")

	holds := func(name string, i int) bool {
		fi, err := os.Stat(filepath.Join(f.dataDir(name), "repos", f.key(i)+".git"))
		return err == nil && fi.IsDir()
	}
	ids, _ := waitForShares(t, f, holds, repos, names, 90*time.Second)

	const lost = "full-c"
	survivors := []string{"full-a", "full-b"}
	lacked := map[string]int{}
	for _, name := range survivors {
		for _, i := range repos {
			if !holds(name, i) {
				lacked[name]++
			}
		}
	}
	if lacked["full-a"]+lacked["full-b"] == 0 {
		t.Fatalf("the survivors hold every repository already: the loss of %s tests nothing", lost)
	}
	packs := func() map[string]int {
		out := map[string]int{}
		for _, i := range repos {
			out[f.name(i)] = f.up.Packs(f.name(i))
		}
		return out
	}
	// What the survivors took from the owner: pulls that cloned or fetched
	// objects (a pull that found nothing new is a check), once no pull is
	// queued or running.
	ownerPacks := func() map[string]float64 {
		out := map[string]float64{}
		eventually(t, 60*time.Second, "the survivors' pulls are done", func() error {
			for _, name := range survivors {
				fams, err := scrape(bases[name] + "/metrics")
				if err != nil {
					return err
				}
				if n, _ := sample(fams, "gitfleet_pull_queue"); n > 0 {
					return fmt.Errorf("%s has %v pulls queued or running", name, n)
				}
				clones, _ := sample(fams, "gitfleet_pull_duration_seconds", "kind", "clone")
				fetches, _ := sample(fams, "gitfleet_pull_duration_seconds", "kind", "fetch")
				out[name] = clones + fetches
			}
			return nil
		})
		return out
	}
	packsBefore, ownerBefore := packs(), ownerPacks()
	fellBack := map[string]int{}
	for _, name := range survivors {
		fellBack[name] = f.procs[name].count("no other full node serves the verified state")
	}

	f.procs[lost].kill()
	eventually(t, 120*time.Second, "past its grace, the survivors hold every repository", func() error {
		for _, name := range survivors {
			for _, i := range repos {
				if !holds(name, i) {
					return fmt.Errorf("%s does not hold %s yet", name, f.key(i))
				}
			}
		}
		return nil
	})
	for _, name := range survivors {
		if n := f.procs[name].count("copied from a peer full node"); n < lacked[name] {
			t.Errorf("%s copied %d repositories from a peer, want the %d it lacked", name, n, lacked[name])
		}
		if n := f.procs[name].count("no other full node serves the verified state") - fellBack[name]; n > 0 {
			t.Errorf("%s fell back to the owner %d times after the loss", name, n)
		}
	}
	if got := packs(); !maps.Equal(got, packsBefore) {
		t.Errorf("the upstreams were asked for packs during the copies: %v, before %v", got, packsBefore)
	}
	if got := ownerPacks(); !maps.Equal(got, ownerBefore) {
		t.Errorf("the survivors cloned or fetched from the owner during the copies: %v pulls, %v before", got, ownerBefore)
	}
	for _, name := range survivors {
		for _, i := range repos {
			want, err := f.up.Refs(f.name(i))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := cloneOf(t, bases[name]+"/"+f.key(i)+".git"); err != nil || !maps.Equal(got, want) {
				t.Fatalf("clone of %s through %s after the loss: refs %v, %v; upstream has %v", f.key(i), name, got, err, want)
			}
		}
	}

	// Back with its disk: the survivors drop what is no longer theirs.
	startFull(lost)
	waitForShares(t, f, holds, repos, names, 120*time.Second)
	for _, name := range survivors {
		if n := f.procs[name].count("repository dropped: the full tier placed it elsewhere"); n == 0 {
			t.Errorf("%s dropped nothing once %s was back", name, lost)
		}
	}
	for _, name := range names {
		for _, i := range repos {
			want, err := f.up.Refs(f.name(i))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := cloneOf(t, bases[name]+"/"+f.key(i)+".git"); err != nil || !maps.Equal(got, want) {
				t.Fatalf("clone of %s through %s at the end: refs %v, %v; upstream has %v", f.key(i), name, got, err, want)
			}
		}
	}
	t.Logf("%s (node %d) lost: the survivors copied %v repositories from each other; back, the tier dropped the extra copies",
		lost, ids[lost], lacked)
}

// waitForShares waits until the full nodes names are alive, every
// repository of repos lists two replicas among them, and each full node
// holds exactly the repositories placed on it (holds). It returns the
// full nodes' IDs by name, and the replicas by key.
func waitForShares(t *testing.T, f *fleet, holds func(string, int) bool, repos []int, names []string,
	within time.Duration) (ids map[string]uint32, replicas map[string][]uint32) {
	t.Helper()
	eventually(t, within, "each full node holds exactly the repositories placed on it", func() error {
		var err error
		if ids, err = fullNodeIDs(f.base); err != nil {
			return err
		}
		if len(ids) != len(names) {
			return fmt.Errorf("full nodes %v, want %v", ids, names)
		}
		if replicas, err = tierReplicas(t, f.base, len(repos)); err != nil {
			return err
		}
		for _, i := range repos {
			r := replicas[f.key(i)]
			if len(r) != 2 {
				return fmt.Errorf("%s: replicas %v, want 2", f.key(i), r)
			}
			for name, id := range ids {
				if want := slices.Contains(r, id); holds(name, i) != want {
					return fmt.Errorf("%s: %s (node %d) holds it %v, replicas %v", f.key(i), name, id, !want, r)
				}
			}
		}
		return nil
	})
	return ids, replicas
}
