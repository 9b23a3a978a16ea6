package coordinator

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// connect opens a session for the node of resp as Session does, without
// the stream. Caller holds c.mu.
func connect(c *Coordinator, resp *fleetv1.RegisterResponse) *session {
	rec := c.nodes[resp.GetNodeId()]
	s := newSession(c, rec, func() {})
	c.sessions[rec.ID] = s
	c.engine.SetBandwidth(rec.ID, rec.MaxBandwidth)
	c.applyChanges(c.table.Connect(membership.NodeInfo{ID: rec.ID, Name: rec.Name, Weight: rec.Capacity,
		Member: rec.Capacity > 0}, c.clk.Now()))
	c.liftRefusals(rec.ID)
	return s
}

// stateSent returns the state of key in the states s sends next.
func stateSent(s *session, key string) string {
	for _, m := range s.next() {
		for _, r := range m.GetRepoStates().GetRepos() {
			if r.GetKey() == key {
				return r.GetState()
			}
		}
	}
	return ""
}

// A repository that its only placement member refuses is unplaceable: it
// is not offered again, full nodes are told its state, and the node's next
// session offers it once more.
func TestARepositoryEveryMemberRefusesIsUnplaceableAndNotOfferedAgain(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	strict := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "strict", Capacity: 1})
	const key = "example.org/a/b"
	if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fs := connect(c, full)
	s := connect(c, strict)
	c.placing = true
	c.setMembers()
	c.decide()
	if _, ok := s.assign[key]; !ok {
		t.Fatalf("the only member was not assigned %s", key)
	}
	clear(s.assign) // sent
	fs.next()

	refusal := &fleetv1.CheckResult{Key: key, ErrorClass: errorClassRefused, Error: "refused by node: blocked destination"}
	for range 3 { // the node's refusal, and two stale copies of it
		c.result(strict.GetNodeId(), refusal)
	}
	if len(s.assign) != 0 {
		t.Errorf("the refused repository was offered again: %v", s.assign)
	}
	if got := stateSent(fs, key); got != repostate.Unplaceable.String() {
		t.Errorf("full nodes are told %s is %q, want %q", key, got, repostate.Unplaceable.String())
	}
	if n := c.engine.UnplaceableCount(); n != 1 {
		t.Errorf("%d unplaceable repositories, want 1", n)
	}
	if e := c.status[key].errorText(key); e == "" {
		t.Error("the unplaceable repository shows no reason")
	}
	c.mu.Unlock()
	_, err := c.FetchNow(as(full), &fleetv1.FetchNowRequest{Key: key})
	c.mu.Lock()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "unplaceable") {
		t.Errorf("an on-demand check of the unplaceable repository: %v, want FailedPrecondition saying why", err)
	}

	// The node comes back (maybe with another policy): it is offered the
	// repository once more.
	s = connect(c, strict)
	c.decide()
	if _, ok := s.assign[key]; !ok {
		t.Fatalf("a new session was not offered the repository it refused before")
	}
	if got := stateSent(fs, key); got == repostate.Unplaceable.String() || got == "" {
		t.Errorf("after the new session full nodes are told %q", got)
	}
}
