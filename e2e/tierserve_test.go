package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Three full nodes with --full-replicas 2 and one partial node that owns
// every repository: each full node holds only the repositories placed on
// it, and answers for every repository all the same. A clone of each
// through each full node (a relay through the one that does not hold it)
// is whole and has the upstream's refs, and an ls-remote through each
// agrees. A hostile volunteer, with its join credentials, that opens the
// link between full nodes under a holder's ID is refused, and a public
// client that calls the link's port gets no git answer.
func TestEveryFullNodeAnswersForEveryRepositoryAndHoldsOnlyItsShare(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	parallel(t, fleetTest)
	f := newFleet(t)
	repos := seq(0, 8)
	f.seed(repos, "8 repositories")
	f.coordArgs = []string{"--full-replicas", "2"}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	bases := map[string]string{"full-a": f.base, "full-b": "http://" + freeAddr(t), "full-c": "http://" + freeAddr(t)}
	tunnels := map[string]string{"full-a": f.tunnelAddr, "full-b": freeAddr(t), "full-c": freeAddr(t)}
	for _, name := range slices.Sorted(maps.Keys(bases)) {
		f.startNode(name, "full", "--http", bases[name][len("http://"):], "--tunnel", tunnels[name], "--api-token", apiToken,
			"--capacity", "0")
	}
	f.startNode("partial-1", "partial")

	holds := func(name string, i int) bool {
		fi, err := os.Stat(filepath.Join(f.dataDir(name), "repos", f.key(i)+".git"))
		return err == nil && fi.IsDir()
	}
	var ids map[string]uint32
	var replicas map[string][]uint32
	eventually(t, 90*time.Second, "each full node holds exactly the repositories placed on it", func() error {
		var err error
		if ids, err = fullNodeIDs(f.base); err != nil {
			return err
		}
		if len(ids) != 3 {
			return fmt.Errorf("full nodes %v, want 3", ids)
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

	for _, name := range slices.Sorted(maps.Keys(bases)) {
		for _, i := range repos {
			want, err := f.up.Refs(f.name(i))
			if err != nil {
				t.Fatal(err)
			}
			got, err := cloneOf(t, bases[name]+"/"+f.key(i)+".git")
			if err != nil {
				t.Fatalf("clone of %s through %s (holds it: %v): %v", f.key(i), name, holds(name, i), err)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("clone of %s through %s (holds it: %v): refs %v, upstream has %v", f.key(i), name, holds(name, i), got, want)
			}
		}
		if err := f.servedAt(bases[name], repos); err != nil {
			t.Fatalf("ls-remote through %s: %v", name, err)
		}
	}

	// The hostile volunteer: a tunnel to the full node that does not hold
	// repository 0, under the ID of the replica it relays to.
	var relay, holder string
	for name, id := range ids {
		if r := replicas[f.key(0)]; !slices.Contains(r, id) {
			relay = name
		} else if id == r[0] {
			holder = name
		}
	}
	h := newHostile(t, f.grpc)
	h.join(f.token)
	ht := h.tunnel(tunnels[relay], ids[holder], h.ownProof(ids[holder]), forged)
	eventually(t, 30*time.Second, "the link under the holder's ID is refused to a volunteer", func() error {
		if ht.log.count("full node refused the tunnel") == 0 {
			return fmt.Errorf("not refused yet: %s", ht.log)
		}
		return nil
	})
	if n := ht.log.count("tunnel up"); n != 0 {
		t.Fatalf("the volunteer's tunnel as %s (node %d) was taken %d times", holder, ids[holder], n)
	}
	if err := f.servedAt(bases[relay], repos[:1]); err != nil {
		t.Fatalf("through %s, after the hostile tunnel: %v", relay, err)
	}
	resp, err := http.Get("http://" + tunnels[relay] + "/" + f.key(0) + ".git/info/refs?service=git-upload-pack")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("a public client that calls the link's port gets %s", resp.Status)
		}
	}
	t.Logf("8 repositories, each cloned through 3 full nodes (one relay each); %s relays %s to %s", relay, f.key(0), holder)
}
