package e2e

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// servedAt checks that the full node at base serves every repository in
// repos with exactly the upstream's branches and tags.
func (f *fleet) servedAt(base string, repos []int) error {
	for _, i := range repos {
		want, err := f.up.Refs(f.name(i))
		if err != nil {
			return err
		}
		got, err := lsRemote(base + "/" + f.key(i) + ".git")
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("%s: %s serves %v, upstream has %v", f.key(i), base, got, want)
		}
	}
	return nil
}

var pulledKey = regexp.MustCompile(`msg="pulled from owner" key=(\S+)`)

func readLog(p *proc) string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// pulled lists the keys p's log says were pulled from their owners.
func pulled(p *proc) []string {
	var keys []string
	for _, m := range pulledKey.FindAllStringSubmatch(readLog(p), -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// pullQueueEmpty says whether the full node at base has no pull pending or
// running: what it decided to pull from the states it has is done.
func pullQueueEmpty(base string) error {
	fams, err := scrape(base + "/metrics")
	if err != nil {
		return err
	}
	pending, ok1 := sample(fams, "gitfleet_pull_queue", "state", "pending")
	running, ok2 := sample(fams, "gitfleet_pull_queue", "state", "running")
	if !ok1 || !ok2 || pending+running > 0 {
		return fmt.Errorf("pull queue: %v pending, %v running", pending, running)
	}
	return nil
}

// Two full nodes, each a complete mirror, serve the same fleet: both serve
// every repository with the upstream's refs, an API change made on one is
// served by both, and one killed while the upstreams move on catches up
// after its restart by pulling only the repositories that changed.
func TestTwoFullNodesServeTheSameFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 12)
	for _, i := range seq(0, 13) { // 12 in the catalog, one added through the API
		if err := f.up.Create(f.name(i), []string{"main"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(repos, "12 repositories")
	f.startCoordinator()
	httpB, tunnelB := freeAddr(t), freeAddr(t)
	baseA, baseB := f.base, "http://"+httpB
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken)
	f.startNode("full-b", "full", "--http", httpB, "--tunnel", tunnelB, "--api-token", apiToken)
	f.startNode("partial-1", "partial")
	f.startNode("partial-2", "partial")
	eventually(t, 90*time.Second, "both full nodes serve every repository", func() error {
		if err := f.servedAt(baseA, repos); err != nil {
			return err
		}
		return f.servedAt(baseB, repos)
	})

	// An operator's change on one full node reaches the other.
	added := 12
	if code := call(t, "POST", baseA+"/api/v1/repos", apiToken,
		strings.NewReader(fmt.Sprintf(`{"url":%q}`, f.up.RepoURL(f.name(added)))), nil); code != 201 && code != 200 {
		t.Fatalf("add through the first full node: %d", code)
	}
	all := append(repos, added)
	eventually(t, 60*time.Second, "the repository added on one full node is served by both", func() error {
		if err := f.servedAt(baseA, all); err != nil {
			return err
		}
		return f.servedAt(baseB, all)
	})

	// One full node lost; the upstreams move on; the other keeps serving.
	f.procs["full-b"].kill()
	changed := map[string]bool{}
	for _, i := range []int{1, 4, 7} {
		if _, err := f.up.Commit(f.name(i), "main"); err != nil {
			t.Fatal(err)
		}
		changed[f.key(i)] = true
	}
	eventually(t, 60*time.Second, "the remaining full node serves the pushes", func() error { return f.servedAt(baseA, all) })

	// Back with its disk: it catches up, pulling only what it lacks.
	f.startNode("full-b-again", "full", "--data", f.dataDir("full-b"), "--http", httpB, "--tunnel", tunnelB, "--api-token", apiToken)
	start := time.Now()
	eventually(t, 60*time.Second, "the restarted full node serves every repository again", func() error { return f.servedAt(baseB, all) })
	t.Logf("caught up %s after its restart", time.Since(start).Round(10*time.Millisecond))
	// Pulls that would follow, if any, are done once its pull queue is
	// empty: every state it was sent is in (it serves them all).
	eventually(t, 30*time.Second, "the restarted full node's pull queue empty", func() error { return pullQueueEmpty(baseB) })
	again := f.procs["full-b-again"]
	keys := pulled(again)
	for _, k := range keys {
		if !changed[k] {
			t.Errorf("the restarted full node pulled %s, which did not change while it was down", k)
		}
	}
	if n := clones(again); n != 0 {
		t.Errorf("the restarted full node cloned %d repositories it already had", n)
	}
	t.Logf("pulled after the restart: %v (changed while down: %d)", keys, len(changed))
}
