package e2e

import (
	"fmt"
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
	repos := seq(0, 12)
	f.seed(repos, "12 repositories")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr)
	f.startNode("partial", "partial")
	// Its policy refuses private addresses, as a volunteer's default does:
	// the upstreams are on 127.0.0.1.
	f.startNode("strict", "partial", "--allow-private-upstreams=false")

	eventually(t, 90*time.Second, "every repository served", func() error { return f.servedLikeUpstream(repos) })
	strict := ownerOfNode(t, f.dataDirs["strict"])
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
