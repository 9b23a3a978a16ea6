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
// between full nodes: the upstreams see no request for a pack, the owner
// serves the full nodes nothing, and each survivor logs the copies. The
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
	ownerMetrics := freeAddr(t)
	f.startNode("partial-1", "partial", "--metrics", ownerMetrics)

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
	ownerServed := func() float64 {
		fams, err := scrape("http://" + ownerMetrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := sample(fams, "gitfleet_served_bytes_total", "to", "full-node")
		return v
	}
	packsBefore, servedBefore := packs(), ownerServed()

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
		if n := f.procs[name].count("no other full node serves the verified state"); n > 0 {
			t.Errorf("%s fell back to the owner %d times", name, n)
		}
	}
	if got := packs(); !maps.Equal(got, packsBefore) {
		t.Errorf("the upstreams were asked for packs during the copies: %v, before %v", got, packsBefore)
	}
	if got := ownerServed(); got != servedBefore {
		t.Errorf("the owner served the full nodes %v bytes during the copies, %v before: want nothing more", got, servedBefore)
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
