package coordinator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// targetOf is where key is or goes: its target during a move, else its owner.
func targetOf(c *Coordinator, key string) uint32 {
	o, t := c.owner(repokey.Key(key))
	if t != 0 {
		return t
	}
	return o
}

// repoSent returns the Repo of key among the assigns s sends next.
func reposSent(s *session) map[string]*fleetv1.Repo {
	out := map[string]*fleetv1.Repo{}
	for _, m := range s.next() {
		for _, r := range m.GetAssign().GetRepos() {
			out[r.GetKey()] = r
		}
	}
	return out
}

// Fork networks at the coordinator: a declared network's members get one
// owner and its pool in their Assign; roots a full node's pull reports join
// repositories into a network; a partial node's roots, forged or not, join
// nothing; and a restarted coordinator keeps its networks.
func TestNetworksPlaceMembersTogetherAndTrustOnlyFullNodesRoots(t *testing.T) {
	dir := t.TempDir()
	c := newTestCoordinator(t, dir, testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	var parts []*fleetv1.RegisterResponse
	for i := range 4 {
		parts = append(parts, mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: fmt.Sprintf("p%d", i), Capacity: 1}))
	}
	add := func(key string, attrs map[string]string) {
		t.Helper()
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key, Attrs: attrs}); err != nil {
			t.Fatalf("add %s: %v", key, err)
		}
	}
	var declared, forks, alone []string
	for i := range 100 { // enough standalone keys that a network of 8 is not split
		add(fmt.Sprintf("example.org/more/m%d", i), nil)
	}
	for i := range 8 {
		declared = append(declared, fmt.Sprintf("example.org/linux/tree%d", i))
		add(declared[i], map[string]string{catalog.AttrNetwork: "linux"})
		forks = append(forks, fmt.Sprintf("example.org/forks/f%d", i))
		add(forks[i], nil)
		alone = append(alone, fmt.Sprintf("example.org/alone/a%d", i))
		add(alone[i], nil)
	}
	if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://example.org/bad/x",
		Attrs: map[string]string{catalog.AttrNetwork: "root:forged"}}); err == nil || !strings.Contains(err.Error(), "network") {
		t.Errorf("a bad network name was accepted: %v", err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	fs := connect(c, full)
	sessions := map[uint32]*session{}
	for _, p := range parts {
		sessions[p.GetNodeId()] = connect(c, p)
	}
	c.placing = true
	c.setMembers()
	c.decide()

	// Declared before any clone: one node, and the pool in the Assign.
	node := targetOf(c, declared[0])
	for _, k := range declared {
		if got := targetOf(c, k); got != node {
			t.Errorf("%s goes to node %d, the rest of its network to %d", k, got, node)
		}
	}
	sent := reposSent(sessions[node])
	for _, k := range declared {
		if r := sent[k]; r == nil || r.GetNetwork() != "linux" {
			t.Errorf("the assign of %s: %v, want network linux", k, r)
		}
	}
	confirmAll := func() {
		for range 10 {
			for id, s := range sessions {
				for k := range reposSent(s) {
					c.result(id, &fleetv1.CheckResult{Key: k, Ok: true, Cloned: true})
				}
			}
		}
	}
	confirmAll()

	// A full node's pulls report a shared root: the forks join one network.
	shared := strings.Repeat("a", 40)
	for i, k := range forks {
		own := fmt.Sprintf("%040x", i+1)
		c.result(full.GetNodeId(), &fleetv1.CheckResult{Key: k, Ok: true, Served: true, RootsKnown: true, Roots: []string{shared, own}})
	}
	name := c.nets.Of(repokey.Key(forks[0]))
	if name != "root:"+shared {
		t.Fatalf("the forks are in network %q, want root:%s", name, shared)
	}
	confirmAll()
	owner, _ := c.owner(repokey.Key(forks[0]))
	for _, k := range forks {
		if o, tgt := c.owner(repokey.Key(k)); o != owner || tgt != 0 {
			t.Errorf("%s: owner %d target %d, want all on %d", k, o, tgt, owner)
		}
	}
	if got := networkSent(fs, forks[0]); got.GetNetwork() != name || got.GetNetworkParts() != 1 {
		t.Errorf("full nodes are told %s is in %q (%d parts), want %q", forks[0], got.GetNetwork(), got.GetNetworkParts(), name)
	}

	// A partial node forges roots to join two unrelated repositories (as a
	// pull, and as its own check): nothing joins.
	p := parts[0].GetNodeId()
	for _, served := range []bool{true, false} {
		for _, k := range alone[:2] {
			c.result(p, &fleetv1.CheckResult{Key: k, Ok: true, Served: served, RootsKnown: true, Roots: []string{shared}})
		}
	}
	for _, k := range alone {
		if n := c.nets.Of(repokey.Key(k)); n != "" {
			t.Errorf("a partial node's forged roots put %s in network %q", k, n)
		}
	}

	// A fork whose history diverged entirely leaves.
	c.result(full.GetNodeId(), &fleetv1.CheckResult{Key: forks[7], Ok: true, Served: true, RootsKnown: true, Roots: []string{strings.Repeat("b", 40)}})
	if n := c.nets.Of(repokey.Key(forks[7])); n != "" {
		t.Errorf("a fork with none of its network's roots is still in %q", n)
	}

	// A restart keeps the networks, under their names, and moves nothing.
	c.mu.Unlock()
	if err := c.persist(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	r := newTestCoordinator(t, dir, testJoin, testFull)
	c.mu.Lock()
	for _, k := range append(append(declared, forks...), alone...) {
		if got, want := r.nets.Of(repokey.Key(k)), c.nets.Of(repokey.Key(k)); got != want {
			t.Errorf("after a restart %s is in %q, was in %q", k, got, want)
		}
		n1, p1, _ := r.engine.Network(repokey.Key(k))
		n2, p2, _ := c.engine.Network(repokey.Key(k))
		if n1 != n2 || p1 != p2 {
			t.Errorf("after a restart the engine places %s in %q/%q, was %q/%q", k, n1, p1, n2, p2)
		}
	}
}

// networkSent returns the state of key among the states s sends next.
func networkSent(s *session, key string) *fleetv1.RepoState {
	for _, m := range s.next() {
		for _, r := range m.GetRepoStates().GetRepos() {
			if r.GetKey() == key {
				return r
			}
		}
	}
	return nil
}

// When a network grows past a part and is split, every member's pool
// changes (NAME to NAME#P) while many keep their owner: those owners are
// sent an Assign with the new pool (a move's Assign carries it for the
// others), and the full nodes the new number of parts.
func TestASplitNetworksMembersThatKeepTheirOwnerAreSentTheirNewPool(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	var parts []*fleetv1.RegisterResponse
	for i := range 3 {
		parts = append(parts, mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: fmt.Sprintf("p%d", i), Capacity: 1}))
	}
	add := func(key string, attrs map[string]string) {
		t.Helper()
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key, Attrs: attrs}); err != nil {
			t.Fatalf("add %s: %v", key, err)
		}
	}
	linux := map[string]string{catalog.AttrNetwork: "linux"}
	var members []string
	for i := range 60 {
		add(fmt.Sprintf("example.org/more/m%d", i), nil)
	}
	for i := range 8 {
		members = append(members, fmt.Sprintf("example.org/linux/tree%02d", i))
		add(members[i], linux)
	}
	c.mu.Lock()
	fs := connect(c, full)
	sessions := map[uint32]*session{}
	for _, p := range parts {
		sessions[p.GetNodeId()] = connect(c, p)
	}
	c.placing = true
	c.setMembers()
	c.decide()
	for range 10 { // every assign confirmed
		for id, s := range sessions {
			for k := range reposSent(s) {
				c.result(id, &fleetv1.CheckResult{Key: k, Ok: true, Cloned: true})
			}
		}
	}
	owner, _ := c.owner(repokey.Key(members[0]))
	for _, k := range members {
		if o, tgt := c.owner(repokey.Key(k)); o != owner || tgt != 0 {
			t.Fatalf("%s: owner %d target %d, want the whole network on %d", k, o, tgt, owner)
		}
		if _, pool, n := c.engine.Network(repokey.Key(k)); pool != "linux" || n != 1 {
			t.Fatalf("%s: pool %q in %d parts, want linux whole", k, pool, n)
		}
	}
	fs.next() // the full node's states so far
	c.mu.Unlock()

	// The network grows past a part (half of a node's bound of about 33).
	for i := 8; i < 40; i++ {
		members = append(members, fmt.Sprintf("example.org/linux/tree%02d", i))
		add(members[i], linux)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decide()
	sent := map[uint32]map[string]*fleetv1.Repo{}
	for id, s := range sessions {
		sent[id] = reposSent(s)
	}
	states := map[string]*fleetv1.RepoState{}
	for _, m := range fs.next() {
		for _, r := range m.GetRepoStates().GetRepos() {
			states[r.GetKey()] = r
		}
	}
	kept := 0
	for _, k := range members[:8] {
		_, pool, n := c.engine.Network(repokey.Key(k))
		if n < 2 || !strings.HasPrefix(pool, "linux#") {
			t.Fatalf("%s: pool %q in %d parts, want a part of a split linux", k, pool, n)
		}
		if st := states[k]; st.GetNetwork() != "linux" || st.GetNetworkParts() != uint32(n) {
			t.Errorf("the full node is told %s is in %q in %d parts, want linux in %d", k, st.GetNetwork(), st.GetNetworkParts(), n)
		}
		o, tgt := c.owner(repokey.Key(k))
		if o != owner || tgt != 0 {
			continue // moves: its new owner's Assign carries the pool
		}
		kept++
		if r := sent[owner][k]; r.GetNetwork() != pool {
			t.Errorf("%s kept its owner %d, which was sent %v, want an Assign with its new pool %q", k, owner, r, pool)
		}
	}
	if kept == 0 {
		t.Fatal("no member kept its owner through the split: the test shows nothing")
	}
}

// A forge's feed names a fork's parent: the fork is placed with its
// parent, and its Assign carries the network's pool, before any clone or
// roots; a restart keeps the relation; a parent not in the fleet joins
// nothing.
func TestAFeedsForkParentPlacesTheForkWithItsParentBeforeItsFirstClone(t *testing.T) {
	dir := t.TempDir()
	c := newTestCoordinator(t, dir, testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	var parts []*fleetv1.RegisterResponse
	for i := range 4 {
		parts = append(parts, mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: fmt.Sprintf("p%d", i), Capacity: 1}))
	}
	for i := range 40 {
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: fmt.Sprintf("https://github.com/more/m%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	const up, fork, stray = "github.com/up/stream", "github.com/someone/fork", "github.com/someone/stray"
	for _, k := range []string{up, fork, stray} {
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + k}); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	connect(c, full)
	sessions := map[uint32]*session{}
	for _, p := range parts {
		sessions[p.GetNodeId()] = connect(c, p)
	}
	c.placing = true
	c.setMembers()
	c.decide()
	for _, s := range sessions {
		s.next() // the first assigns, standalone
	}

	c.feedParents(map[string]string{fork: up, stray: "github.com/not/in-the-fleet"})
	c.decide()
	name := c.nets.Of(fork)
	if name == "" || c.nets.Of(up) != name {
		t.Fatalf("the fork is in %q, its parent in %q: want one network", name, c.nets.Of(up))
	}
	if n := c.nets.Of(stray); n != "" {
		t.Errorf("a fork of a repository not in the fleet is in network %q", n)
	}
	node := targetOf(c, fork)
	if got := targetOf(c, up); got != node {
		t.Errorf("the fork goes to node %d, its parent to %d", node, got)
	}
	if r := reposSent(sessions[node])[fork]; r == nil || r.GetNetwork() != name {
		t.Errorf("the fork's assign: %v, want the pool of network %q at once", r, name)
	}

	// A restart keeps it.
	c.mu.Unlock()
	if err := c.persist(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	r := newTestCoordinator(t, dir, testJoin, testFull)
	c.mu.Lock()
	if got := r.nets.Of(fork); got != name || r.nets.Of(up) != name {
		t.Errorf("after a restart the fork is in %q, its parent in %q; want %q", got, r.nets.Of(up), name)
	}
}

// A full node that owns repositories itself (as in gitfleet up) reports
// their roots on its own checks, not on served pulls: those roots make
// networks too, as a partial node's never do.
func TestAFullNodeThatOwnsRepositoriesReportsRootsOnItsChecks(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full", Capacity: 1})
	keys := []string{"example.org/forks/a", "example.org/forks/b"}
	for _, k := range keys {
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + k}); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	connect(c, full)
	c.placing = true
	c.setMembers()
	c.decide()
	shared := strings.Repeat("b", 40)
	for i, k := range keys {
		c.result(full.GetNodeId(), &fleetv1.CheckResult{Key: k, Ok: true, Cloned: true}) // the clone confirms it
		if o, _ := c.owner(repokey.Key(k)); o != full.GetNodeId() {
			t.Fatalf("%s is owned by %d, want the full node %d", k, o, full.GetNodeId())
		}
		c.result(full.GetNodeId(), &fleetv1.CheckResult{Key: k, Ok: true, RootsKnown: true, Roots: []string{shared, fmt.Sprintf("%040x", i+1)}})
	}
	if a, b := c.nets.Of(repokey.Key(keys[0])), c.nets.Of(repokey.Key(keys[1])); a == "" || a != b {
		t.Fatalf("the full node's own checks reported a shared root, and the networks are %q and %q", a, b)
	}
}
