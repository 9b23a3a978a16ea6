package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A partial node whose egress policy is stricter than the coordinator's
// (it refuses private addresses; these upstreams are on 127.0.0.1) refuses what it is
// given. Each refusal is remembered: the node is told of each repository
// once, says so once, and the other nodes mirror what it refused.
func TestANodeThatRefusesARepositoryIsNotOfferedItAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	// The three nodes register as 1, 2 and 3 in some order: whichever the
	// strict node is, it is offered a repository to refuse.
	members := membersOf(1, 2, 3)
	repos := f.reposPlacing(12, 1, members)
	f.seed(repos, fmt.Sprintf("%d repositories", len(repos)))
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr)
	f.startNode("partial", "partial")
	// Its policy refuses private addresses, as a volunteer's default does:
	// the upstreams are on 127.0.0.1.
	f.startNode("strict", "partial", "--allow-private-upstreams=false")

	eventually(t, 90*time.Second, "every repository served", func() error { return f.servedLikeUpstream(repos) })
	strict := ownerOfNode(t, f.dataDirs["strict"])
	f.placedAsComputed(membersOf(ownerOfNode(t, f.dataDirs["full"]), ownerOfNode(t, f.dataDirs["partial"]), strict), members)
	eventually(t, 30*time.Second, "no repository owned by the node that refuses them", func() error {
		all, err := apiRepos(f.base)
		if err != nil {
			return err
		}
		for k, r := range all {
			if r.Owner == strict {
				return fmt.Errorf("%s is owned by the refusing node %d", k, strict)
			}
		}
		return nil
	})

	refusals := refusalsByKey(readLog(f.procs["strict"]))
	if len(refusals) == 0 {
		t.Fatal("the strict node refused nothing: the test proves less than it says")
	}
	for k, n := range refusals {
		if n != 1 {
			t.Errorf("the strict node refused %s %d times, want once", k, n)
		}
	}
	if told := f.procs["coordinator"].count("a node refuses a repository"); told != len(refusals) {
		t.Errorf("the coordinator told of %d refusals, the node made %d", told, len(refusals))
	}
	t.Logf("the strict node refused %d repositories, once each", len(refusals))
}

// refusalsByKey counts a node log's refusals of an assignment, by key.
func refusalsByKey(log string) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "assignment refused") {
			continue
		}
		_, rest, _ := strings.Cut(line, " key=")
		key, _, _ := strings.Cut(rest, " ")
		out[key]++
	}
	return out
}

// gitfleet up restarted without the --egress-allow that let it mirror the
// upstreams an operator added through the API: its full node, the only
// member, refuses each of them once. They show as unplaceable (API,
// metric), are still served from the copies the node holds, and nothing
// loops.
func TestUpRestartedWithAStricterEgressPolicyRefusesEachRepositoryOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 4)
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(nil, "no repositories: they come through the API")
	data, grpc, tunnel := filepath.Join(t.TempDir(), "up"), freeAddr(t), freeAddr(t)
	args := func(extra ...string) []string {
		return append([]string{"up", "--data", data, "--catalog", f.catalog, "--http", f.http, "--grpc", grpc,
			"--tunnel", tunnel, "--join-token", f.token, "--api-token", apiToken, "--catalog-interval", "1s",
			"--max-interval", "2s", "--min-interval", "500ms"}, extra...)
	}
	first := start(t, "up", args("--egress-allow", "127.0.0.1/32")...)
	// The API answers reads from the full node's own state at once; a
	// write needs the coordinator, and until the full node's session with
	// it is up (in `up` too: the two roles talk over gRPC) the answer is
	// 503 with Retry-After, which a client heeds.
	eventually(t, 30*time.Second, "the API answers", func() error { _, err := apiRepos(f.base); return err })
	for _, i := range repos {
		body := fmt.Sprintf(`{"url": %q}`, f.up.RepoURL(f.name(i)))
		if code := callAsAClient(t, "POST", f.base+"/api/v1/repos", apiToken, body, nil); code != 201 {
			t.Fatalf("POST %s: %d, want 201", f.up.RepoURL(f.name(i)), code)
		}
	}
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	first.stop()

	strict := start(t, "up-strict", args()...)
	eventually(t, 60*time.Second, "every repository unplaceable", func() error {
		all, err := apiRepos(f.base)
		if err != nil {
			return err
		}
		for _, i := range repos {
			if r := all[f.key(i)]; r.State != "unplaceable" {
				return fmt.Errorf("%s: %+v", f.key(i), r)
			}
		}
		return nil
	})
	if err := f.servedLikeUpstream(repos); err != nil {
		t.Errorf("the copies are no longer served: %v", err)
	}
	// And the catalog's one entry (an upstream that does not exist, on
	// 127.0.0.1 too): the restart's policy refuses it, purge protection
	// holds it as it was placed before, and the node refuses it as well.
	eventually(t, 30*time.Second, "the unplaceable counted", func() error {
		fams, err := scrape(f.base + "/metrics")
		if err != nil {
			return err
		}
		if v, _ := sample(fams, "gitfleet_placement_unplaceable"); v != float64(len(repos)+1) {
			return fmt.Errorf("gitfleet_placement_unplaceable = %v, want %d", v, len(repos)+1)
		}
		return nil
	})
	refusals := refusalsByKey(readLog(strict))
	for _, i := range repos {
		if n := refusals[f.key(i)]; n != 1 {
			t.Errorf("%s refused %d times, want once", f.key(i), n)
		}
	}
}
