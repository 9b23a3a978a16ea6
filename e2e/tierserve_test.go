package e2e

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Three full nodes with --full-replicas 2 and one partial node that owns
// every repository: each full node holds only the repositories placed on
// it, and answers for every repository all the same. A clone of each
// through each full node (a relay through the one that does not hold it)
// is whole and has the upstream's refs, and an ls-remote through each
// agrees, and so do the repository's API detail (served, the upstream's
// refs, both replicas) and its status page. A hostile volunteer, with its join credentials, that opens the
// link between full nodes under a holder's ID is refused, and a public
// client that calls the link's port gets no git answer. A replica that
// lost its copy answers the relay 404, and is passed over for the next.
func TestEveryFullNodeAnswersForEveryRepositoryAndHoldsOnlyItsShare(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
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
	ids, replicas := waitForShares(t, f, holds, repos, slices.Sorted(maps.Keys(bases)), 90*time.Second)

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
		for _, i := range repos {
			if err := f.detailAt(bases[name], i, 2); err != nil {
				t.Fatalf("through %s (holds it: %v): %v", name, holds(name, i), err)
			}
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

	// The first replica of repository 0 loses its copy (as one that has
	// not pulled it yet): it answers 404 to the relay, which passes it
	// over for the second, for git and for the API alike.
	if err := os.RemoveAll(filepath.Join(f.dataDir(holder), "repos", f.key(0)+".git")); err != nil {
		t.Fatal(err)
	}
	if err := f.servedAt(bases[relay], repos[:1]); err != nil {
		t.Fatalf("through %s, with the first replica %s answering 404: %v", relay, holder, err)
	}
	if n := f.procs[relay].count("relay: a replica does not serve the repository now; trying the next"); n == 0 {
		t.Fatalf("%s never passed over %s, which lost its copy", relay, holder)
	}
	if err := f.detailAt(bases[relay], 0, 2); err != nil {
		t.Fatalf("through %s, with the first replica %s answering 404: %v", relay, holder, err)
	}
	t.Logf("8 repositories, each cloned through 3 full nodes (one relay each); %s relays %s to %s, and to the next replica once it lost its copy", relay, f.key(0), holder)
}

// detailAt checks repository i's API detail and public status through
// base: served, with the upstream's refs, and its replicas replicas, each
// with its state.
func (f *fleet) detailAt(base string, i, replicas int) error {
	want, err := f.up.Refs(f.name(i))
	if err != nil {
		return err
	}
	var d struct {
		Served        bool              `json:"served"`
		Refs          map[string]string `json:"refs"`
		ReplicaStates []struct {
			Node      uint32 `json:"node"`
			Confirmed bool   `json:"confirmed"`
		} `json:"replica_states"`
	}
	if err := getJSON(base+"/api/v1/repos/"+f.key(i), &d); err != nil {
		return err
	}
	if !d.Served || !maps.Equal(d.Refs, want) || len(d.ReplicaStates) != replicas {
		return fmt.Errorf("%s: the API detail says served %v, refs %v, replicas %+v; want served, the upstream's refs %v and %d replicas",
			f.key(i), d.Served, d.Refs, d.ReplicaStates, want, replicas)
	}
	resp, err := http.Get(base + "/-/status/" + f.key(i))
	if err != nil {
		return err
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), f.key(i)) || strings.Contains(string(page), `id="status-word">not mirrored`) {
		return fmt.Errorf("%s: the status page: %s, want the holder's (mirrored)", f.key(i), resp.Status)
	}
	return nil
}
