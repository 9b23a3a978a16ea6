package coordinator

import (
	"testing"

	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// The class the node says of a failed check decides the state (a limit
// has a state of its own, a 451 is gone at once) and is what the
// coordinator keeps and relays; a node of a previous version, which sends
// git's word alone, is understood too.
func TestTheNodesClassOfAFailureDecidesTheStateAndIsKept(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	node := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "volunteer", Capacity: 1})
	const key = "example.org/a/b"
	if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	connect(c, node)
	c.placing = true
	c.setMembers()
	c.decide()
	id := node.GetNodeId()
	c.result(id, &fleetv1.CheckResult{Key: key, Ok: true, Cloned: true})
	for _, tc := range []struct {
		name      string
		res       *fleetv1.CheckResult
		state     repostate.State
		class     repostate.Class
		stored    string
		fromStore repostate.Class
	}{
		{"over the size limit", &fleetv1.CheckResult{ErrorClass: "too-large", Class: uint32(repostate.ClassTooLarge),
			Error: "repository too large: 2.1 GiB over --max-repo-size 1 GiB"}, repostate.TooLarge, repostate.ClassTooLarge, "too large", repostate.ClassTooLarge},
		{"over the refs limit, from a previous version", &fleetv1.CheckResult{ErrorClass: "too-many-refs",
			Error: "too many refs: 200000 over --max-refs 50000"}, repostate.TooManyRefs, repostate.ClassTooManyRefs, "too many refs", repostate.ClassTooManyRefs},
		{"unreachable", &fleetv1.CheckResult{ErrorClass: "network", Class: uint32(repostate.ClassUnreachable),
			Error: "git ls-remote http://h:4030/x: network: connection refused"}, repostate.Failing, repostate.ClassUnreachable, "upstream unreachable", repostate.ClassUnreachable},
		{"an empty advertisement", &fleetv1.CheckResult{ErrorClass: "empty-advertisement", Class: uint32(repostate.ClassEmpty),
			Error: "the source advertises no branches or tags"}, repostate.Failing, repostate.ClassEmpty, "empty advertisement", repostate.ClassEmpty},
		{"a class of a newer version", &fleetv1.CheckResult{ErrorClass: "novel", Class: 200,
			Error: "something new"}, repostate.Failing, repostate.ClassOther, "failed", repostate.ClassOther},
		{"a takedown", &fleetv1.CheckResult{ErrorClass: "legal", Class: uint32(repostate.ClassLegal),
			Error: "git ls-remote https://example.org/a/b: legal: The requested URL returned error: 451"}, repostate.Legal, repostate.ClassLegal, "unavailable for legal reasons", repostate.ClassLegal},
	} {
		tc.res.Key = key
		c.result(id, tc.res)
		r := c.status[key]
		if r.state != tc.state || r.class != tc.class {
			t.Errorf("%s: state %v, class %q; want %v, %q", tc.name, r.state, r.class, tc.state, tc.class)
		}
		rec := r.record(key)
		if rec.Class != tc.stored {
			t.Errorf("%s: stored class %q, want %q", tc.name, rec.Class, tc.stored)
		}
		if back := rec.status(nil, key); back.class != tc.fromStore || back.state != tc.state {
			t.Errorf("%s: read back as %v, %q", tc.name, back.state, back.class)
		}
	}
	c.result(id, &fleetv1.CheckResult{Key: key, Ok: true})
	if r := c.status[key]; r.class != repostate.NoClass || r.record(key).Class != "" {
		t.Errorf("a check that succeeds keeps the class %q", r.class)
	}
}
