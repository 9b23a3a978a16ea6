package coordinator

import (
	"fmt"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

func TestPackedDurationsKeepMillisecondsThenSeconds(t *testing.T) {
	for ms, want := range map[int64]int64{-5: 0, 0: 0, 1: 1, 1234: 1234, 32767: 32767, 32768: 33000, 45_499: 45_000,
		45_500: 46_000, 3_600_000: 3_600_000, 32767_000: 32767_000, 1 << 40: 32767_000} {
		if got := packMs(ms).ms(); got != want {
			t.Errorf("packMs(%d).ms() = %d, want %d", ms, got, want)
		}
	}
}

// The duration of an owner's check reaches the full nodes with the
// repository's state: the full node's fetch log, and with it ctl log, ctl
// show and the console, show how long a partial node's check took.
func TestAnOwnersCheckDurationReachesTheFullNodes(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	node := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "volunteer", Capacity: 1})
	const key = "example.org/a/b"
	if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fs := connect(c, full)
	connect(c, node)
	c.placing = true
	c.setMembers()
	c.decide()
	fs.next()
	c.result(node.GetNodeId(), &fleetv1.CheckResult{Key: key, Ok: true, Cloned: true, CheckedAtMs: 1.7e12, DurationMs: 2345})
	var got *fleetv1.RepoState
	for _, m := range fs.next() {
		for _, r := range m.GetRepoStates().GetRepos() {
			if r.GetKey() == key {
				got = r
			}
		}
	}
	if got == nil || got.GetLastCheckMs() != 1.7e12 || got.GetLastDurationMs() != 2345 {
		t.Fatalf("the full node is told %v; want the check at 1.7e12 that took 2345 ms", got)
	}
	if rec := c.status[key].record(key); rec.DurationMs != 2345 {
		t.Fatalf("stored with a duration of %d ms", rec.DurationMs)
	}
}

// A node's cap and hours reach the placement engine: a capped node gets
// its share of first clones at once, and a resting one none while another
// node can take them, until its hours begin.
func TestTheCoordinatorPacesACappedNodeAndSparesARestingOne(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	capped := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "capped", Capacity: 1,
		MaxBandwidth: 20e6 / 8, ActiveHours: "01:00-07:00"})
	other := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "other", Capacity: 1})
	if _, err := register(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "bad", ActiveHours: "1-7"}); err == nil {
		t.Fatal("a registration with active hours that are not HH:MM-HH:MM was accepted")
	}
	var keys []string
	for i := range 400 {
		key := fmt.Sprintf("example.org/g/r%03d", i)
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := capped.GetNodeId()
	if rec := c.nodes[id]; rec.MaxBandwidth != 20e6/8 || rec.ActiveHours != "01:00-07:00" {
		t.Fatalf("the node's record keeps %d B/s and %q", rec.MaxBandwidth, rec.ActiveHours)
	}
	connect(c, full)
	cs := connect(c, capped)
	os := connect(c, other)
	c.placing = true
	c.setMembers()
	c.decide()
	// 20 Mbit/s of the reference 100: a fifth of the 50 clones at once.
	if len(cs.assign) != 10 || len(os.assign) != 50 {
		t.Fatalf("first clones at once: capped node %d, other %d; want 10 and 50", len(cs.assign), len(os.assign))
	}
	var fleet uint32
	for _, m := range cs.next() {
		if a := m.GetAssign(); a != nil {
			fleet = a.GetFleetRepos()
		}
	}
	if fleet != 400 {
		t.Fatalf("an assignment tells of %d repositories in the fleet, want 400", fleet)
	}
	targeted := func() int {
		n := 0
		for _, k := range keys {
			if _, target := c.owner(repokey.Key(k)); target == id {
				n++
			}
		}
		return n
	}
	if n := targeted(); n <= 10 {
		t.Fatalf("%d keys wait for the capped node; want its share of 400", n)
	}
	// Its hours end: what it was still to clone goes to the other node.
	c.heartbeat(id, cs, &fleetv1.Heartbeat{Resting: true})
	if n := targeted(); n != 10 {
		t.Fatalf("resting: %d keys wait for the node; want only the 10 it was sent", n)
	}
	for _, k := range keys {
		if _, target := c.owner(repokey.Key(k)); target == id {
			c.result(id, &fleetv1.CheckResult{Key: k, Ok: true, Cloned: true})
		}
	}
	if len(cs.assign) != 0 {
		t.Fatalf("resting, with its clones done: %d more; want none", len(cs.assign))
	}
	// Its hours begin: it gets clones again.
	c.heartbeat(id, cs, &fleetv1.Heartbeat{Resting: false})
	if len(cs.assign) == 0 || len(cs.assign) > 10 {
		t.Fatalf("active again: %d clones at once; want some, at most 10", len(cs.assign))
	}
}

// What the full nodes count against a node reaches it, summed, at once if
// it is in session and when its next session opens.
func TestANodeIsToldItsStanding(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full1 := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full-1"})
	full2 := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full-2"})
	node := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "volunteer", Capacity: 1})
	standing := func(s *session) *fleetv1.Standing {
		var st *fleetv1.Standing
		for _, m := range s.next() {
			if m.GetStanding() != nil {
				st = m.GetStanding()
			}
		}
		return st
	}
	c.mu.Lock()
	s := connect(c, node)
	s.next()
	c.mu.Unlock()
	report := func(full *fleetv1.RegisterResponse, mismatches, stale uint64) {
		t.Helper()
		if _, err := c.ReportStanding(as(full), &fleetv1.ReportStandingRequest{NodeId: node.GetNodeId(), Mismatches: mismatches, StaleReports: stale}); err != nil {
			t.Fatal(err)
		}
	}
	report(full1, 1, 0)
	report(full2, 0, 2)
	report(full1, 2, 0) // full-1's count grew: it replaces its last
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := standing(s); st.GetMismatches() != 2 || st.GetStaleReports() != 2 {
		t.Fatalf("the node in session is told %v; want 2 mismatches and 2 stale reports", st)
	}
	if st := standing(s); st != nil {
		t.Fatalf("told again with nothing new: %v", st)
	}
	s2 := newSession(c, c.nodes[node.GetNodeId()], func() {})
	s2.queueStanding(c.standingOf(node.GetNodeId())) // as Session does
	if st := standing(s2); st.GetMismatches() != 2 || st.GetStaleReports() != 2 {
		t.Fatalf("a new session is told %v", st)
	}
	c.mu.Unlock()
	_, err := c.ReportStanding(as(full1), &fleetv1.ReportStandingRequest{NodeId: 999})
	c.mu.Lock()
	if err == nil {
		t.Fatal("a standing of a node not in the fleet was accepted")
	}
}
