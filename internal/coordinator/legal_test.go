package coordinator

import (
	"testing"

	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// An upstream that answers 451 (unavailable for legal reasons) is gone at
// the first answer, as one that says "not found" again and again is.
func TestALegalTakedownShowsTheRepositoryGoneAtOnce(t *testing.T) {
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
	if owner, _ := c.owner(key); owner != id {
		t.Fatalf("owner %d, want %d", owner, id)
	}
	c.result(id, &fleetv1.CheckResult{Key: key, ErrorClass: "legal",
		Error: "git ls-remote https://example.org/a/b: legal: The requested URL returned error: 451"})
	if got := c.status[key].state.String(); got != repostate.Gone.String() {
		t.Errorf("after a 451 the state is %q, want %q", got, repostate.Gone)
	}
}
