package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/etcdtest"
	"github.com/gitfleet/gitfleet/internal/ha"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// tierFleet registers and connects n full nodes of 1 TB each and adds the
// keys (linux/* in the network "linux"), and ends the warm-up. It returns
// the full nodes.
func tierFleet(t *testing.T, c *Coordinator, n int, keys []string) []*fleetv1.RegisterResponse {
	t.Helper()
	var full []*fleetv1.RegisterResponse
	for i := range n {
		full = append(full, mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull,
			Name: fmt.Sprintf("full%d", i)}))
	}
	for _, k := range keys {
		var attrs map[string]string
		if filepath.Dir(k) == "example.org/linux" {
			attrs = map[string]string{catalog.AttrNetwork: "linux"}
		}
		if _, err := c.AddRepo(as(full[0]), &fleetv1.AddRepoRequest{Url: "https://" + k, Attrs: attrs}); err != nil {
			t.Fatalf("add %s: %v", k, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.placing = true
	for _, f := range full {
		s := connect(c, f)
		c.heartbeat(f.GetNodeId(), s, &fleetv1.Heartbeat{DiskTotalBytes: 1e12})
	}
	return full
}

func tierKeys() []string {
	var keys []string
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("example.org/g/r%02d", i))
	}
	for i := range 4 {
		keys = append(keys, fmt.Sprintf("example.org/linux/tree%d", i))
	}
	return keys
}

// Every repository is on two of three full nodes, a fork network's members
// on the same two, and the full nodes are told so with the states.
func TestTheFullTierHoldsEachRepositoryOnTwoFullNodesAndANetworkAsOne(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 3, keys)
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := []uint32{full[0].GetNodeId(), full[1].GetNodeId(), full[2].GetNodeId()}
	load := map[uint32]int{}
	for _, k := range keys {
		r := c.replicas(repokey.Key(k))
		if len(r) != 2 || r[0] == r[1] || !slices.Contains(ids, r[0]) || !slices.Contains(ids, r[1]) {
			t.Fatalf("%s: replicas %v, want two distinct full nodes of %v", k, r, ids)
		}
		load[r[0]]++
		load[r[1]]++
	}
	linux := c.replicas("example.org/linux/tree0")
	for i := 1; i < 4; i++ {
		if r := c.replicas(repokey.Key(fmt.Sprintf("example.org/linux/tree%d", i))); !slices.Equal(r, linux) {
			t.Errorf("linux/tree%d is on %v, tree0 on %v: a network is one unit", i, r, linux)
		}
	}
	if len(load) != 3 {
		t.Errorf("the replicas are on %v: want all three full nodes used", load)
	}
	s := c.sessions[ids[0]]
	s.sweep = append(s.sweep, repokey.Key(keys[0]))
	if st := networkSent(s, keys[0]); st == nil || !slices.Equal(st.GetReplicas(), c.replicas(repokey.Key(keys[0]))) {
		t.Errorf("the state sent for %s has replicas %v, want %v", keys[0], st.GetReplicas(), c.replicas(repokey.Key(keys[0])))
	}
}

// The API's figures of the tier: each full node's share and what it
// confirmed (the first two full nodes held everything when the others
// came, and keep what stays theirs), and the repositories short of
// replicas: none while settled, a lost full node's share until the
// others confirm it.
func TestTheNodesListShowsEachFullNodesShareAndTheShortfall(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 4, keys)
	ctx := as(full[0])
	shares := func() (map[uint32][2]uint32, uint32) {
		t.Helper()
		nodes, err := c.ListNodes(ctx, &fleetv1.ListNodesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[uint32][2]uint32{}
		for _, n := range nodes.GetNodes() {
			out[n.GetId()] = [2]uint32{n.GetTierRepos(), n.GetTierHeldRepos()}
		}
		cat, err := c.CatalogStatus(ctx, &fleetv1.CatalogStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return out, cat.GetUnderReplicated()
	}
	got, under := shares()
	var sum uint32
	for _, f := range full {
		sum += got[f.GetNodeId()][0]
	}
	third := full[2].GetNodeId()
	if sum != uint32(2*len(keys)) || under != 0 || got[third][0] == 0 || got[third][1] != 0 {
		t.Fatalf("shares %v (sum %d), %d short; want a sum of %d, none short, and a later full node to hold none of its share yet",
			got, sum, under, 2*len(keys))
	}
	c.mu.Lock()
	for _, k := range keys {
		for _, id := range c.replicas(repokey.Key(k)) {
			c.tierConfirm(id, repokey.Key(k))
		}
	}
	c.syncTier()
	c.mu.Unlock()
	got, under = shares()
	if s := got[third]; s[0] != s[1] || under != 0 {
		t.Errorf("a later full node after confirming its share: %v, %d short; want all of it held, none short", s, under)
	}
	// The first full node is lost past its grace: its share is short
	// until the others confirm their copies.
	// (Its weight gone, as the tier's members leave out a node past its
	// grace, through the coordinator's own sync.)
	c.mu.Lock()
	lost := got[full[0].GetNodeId()][0]
	c.tierWeight[full[0].GetNodeId()] = 0
	c.tierMembersDirty = true
	c.syncTier()
	c.mu.Unlock()
	if _, under = shares(); under != lost {
		t.Errorf("after a full node holding %d repositories was lost: %d short, want %d", lost, under, lost)
	}
	c.mu.Lock()
	for _, k := range keys {
		for _, id := range c.replicas(repokey.Key(k)) {
			c.tierConfirm(id, repokey.Key(k))
		}
	}
	c.syncTier()
	c.mu.Unlock()
	if _, under = shares(); under != 0 {
		t.Errorf("after the survivors confirmed the lost share: %d short, want 0", under)
	}
}

// With fewer full nodes than --full-replicas, each holds everything.
func TestWithOneFullNodeItHoldsEveryRepository(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 1, keys)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if r := c.replicas(repokey.Key(k)); !slices.Equal(r, []uint32{full[0].GetNodeId()}) {
			t.Fatalf("%s: replicas %v, want the one full node", k, r)
		}
	}
}

// The full tier's placement is kept in the etcd store with the rest: the
// next leader has it before any full node reconnects.
func TestTheFullTierIsKeptInTheEtcdStore(t *testing.T) {
	etcd := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := ha.Dial(ctx, []string{etcd.Endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	lead := func() (c *Coordinator, end func()) {
		term, err := ha.NewElector(client, "/tier-test", 10*time.Second, "a:7070").Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		c, err = New(ctx, Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), JoinToken: testJoin, FullToken: testFull,
			Store: term.Store()}, slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1.7e9, 0)))
		if err != nil {
			t.Fatal(err)
		}
		return c, func() { c.Close(); _ = term.Resign(ctx) }
	}
	c, end := lead()
	keys := tierKeys()
	tierFleet(t, c, 3, keys)
	c.mu.Lock()
	before := map[string][]uint32{}
	for _, k := range keys {
		before[k] = c.replicas(repokey.Key(k))
	}
	c.mu.Unlock()
	if err := c.persist(ctx); err != nil {
		t.Fatal(err)
	}
	end()

	c, end = lead() // the next term, on another machine's empty disk
	defer end()
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.tier.Members()); n != 3 {
		t.Fatalf("the next leader's tier has %d members, want the 3 stored", n)
	}
	for _, k := range keys {
		if got := c.replicas(repokey.Key(k)); !slices.Equal(got, before[k]) {
			t.Errorf("%s: the next leader has replicas %v, want %v", k, got, before[k])
		}
	}
}

// tierDropsSent returns the keys each session's next batches tell its full
// node to drop (TierDrop), by node.
func tierDropsSent(c *Coordinator) map[uint32][]string {
	out := map[uint32][]string{}
	for id, s := range c.sessions {
		for len(s.states) > 0 || len(s.tierDrop) > 0 || s.sweepAt < len(s.sweep) {
			for _, m := range s.next() {
				out[id] = append(out[id], m.GetTierDrop().GetKeys()...)
			}
		}
	}
	return out
}

// The tier's drops reach a full node only once the unit has two confirmed
// replicas without it: the first two full nodes held everything when two
// more came; a repository placed on the two others alone is dropped by one
// old copy once one new replica confirmed it, and by the other only once
// both did, never leaving fewer than two confirmed copies.
func TestAFullNodeIsToldToDropARepositoryOnlyOnceItsNewReplicasConfirmedIt(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 4, keys)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := []uint32{full[0].GetNodeId(), full[1].GetNodeId()}
	c.syncTier()
	// (The third full node may be told to drop what it was told to take
	// while it was one of three: those drops delete no confirmed copy.)
	if got := tierDropsSent(c); len(got[old[0]])+len(got[old[1]]) > 0 {
		t.Fatalf("drops %v before any new replica confirmed, want none to the full nodes that hold everything", got)
	}
	var moved string
	for _, k := range keys {
		if r := c.replicas(repokey.Key(k)); !slices.Contains(r, old[0]) && !slices.Contains(r, old[1]) && c.nets.Of(repokey.Key(k)) == "" {
			moved = k
			break
		}
	}
	if moved == "" {
		t.Fatal("no repository placed on the two later full nodes alone")
	}
	r := c.replicas(repokey.Key(moved))
	dropped := func() []uint32 {
		var ids []uint32
		for id, ks := range tierDropsSent(c) {
			if slices.Contains(ks, moved) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	c.tierConfirm(r[0], repokey.Key(moved))
	c.syncTier()
	first := dropped()
	if len(first) != 1 || !slices.Contains(old, first[0]) {
		t.Fatalf("once one new replica of %s confirmed, drops went to %v; want one old copy (two confirmed stay)", moved, first)
	}
	c.tierConfirm(r[1], repokey.Key(moved))
	c.syncTier()
	second := dropped()
	if len(second) != 1 || !slices.Contains(old, second[0]) || second[0] == first[0] {
		t.Fatalf("once both new replicas of %s confirmed, drops went to %v (before: %v); want the other old copy", moved, second, first)
	}
	if _, held, _ := c.tier.ReplicasOf(moved); !slices.Equal(held, slices.Sorted(slices.Values(r))) {
		t.Errorf("%s confirmed on %v, want its replicas %v", moved, held, r)
	}
	// A drop queued for a node the tier places the key on again is taken
	// back before it is sent.
	s := c.sessions[old[0]]
	s.queueTierDrop(repokey.Key(keys[0]), true)
	s.queueTierDrop(repokey.Key(keys[0]), false)
	if got := tierDropsSent(c); len(got[old[0]]) > 0 {
		t.Errorf("a drop taken back was sent: %v", got[old[0]])
	}
}

// A drop the tier decides while a full node has no session (its session
// cut, within its grace) is kept and sent when the node's next session
// opens, after the states that no longer name it: the tier counts the
// copy as gone from the moment it decided, and would not decide the drop
// again. A drop the session had queued and not sent when it was cut is
// kept too.
func TestATierDropDecidedWhileAFullNodeIsAwayIsSentWhenItIsBack(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 4, keys)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := []uint32{full[0].GetNodeId(), full[1].GetNodeId()}
	c.syncTier()
	tierDropsSent(c)
	var moved []repokey.Key
	for _, s := range keys {
		k := repokey.Key(s)
		if r := c.replicas(k); !slices.Contains(r, old[0]) && !slices.Contains(r, old[1]) && c.nets.Of(k) == "" {
			moved = append(moved, k)
		}
	}
	if len(moved) < 2 {
		t.Fatalf("%d repositories placed on the two later full nodes alone, want 2", len(moved))
	}
	// The first: its drop is queued on old[0]'s session, which is cut
	// before it sends it.
	for _, id := range c.replicas(moved[0]) {
		c.tierConfirm(id, moved[0])
	}
	c.syncTier()
	if s := c.sessions[old[0]]; !s.tierDrop[moved[0]] {
		t.Fatalf("no drop of %s queued on node %d: %v", moved[0], old[0], s.tierDrop)
	}
	c.sessionClosed(c.sessions[old[0]])
	c.sessionClosed(c.sessions[old[1]])
	// The second: decided while both old copies' nodes are away.
	for _, id := range c.replicas(moved[1]) {
		c.tierConfirm(id, moved[1])
	}
	c.syncTier()
	if _, held, _ := c.tier.ReplicasOf(c.tierUnit(moved[1])); slices.Contains(held, old[0]) || slices.Contains(held, old[1]) {
		t.Fatalf("%s still counted on %v, a node away: the tier decided no drop", moved[1], held)
	}

	c.cfg.BatchSize = 4 // a sweep of several batches
	for i, id := range old {
		s := connect(c, full[i])
		c.tierDropsBack(s)
		s.queueSweep(c.engineKeys) // as a session's start does
		var states, drops []string
		for len(s.states) > 0 || len(s.tierDrop) > 0 || s.sweepAt < len(s.sweep) {
			for _, m := range s.next() {
				for _, r := range m.GetRepoStates().GetRepos() {
					states = append(states, r.GetKey())
				}
				for _, k := range m.GetTierDrop().GetKeys() {
					if len(states) < len(keys) {
						t.Errorf("node %d: the drop of %s came before the sweep of the states ended (%d of %d sent)", id, k, len(states), len(keys))
					}
					drops = append(drops, k)
				}
			}
		}
		want := []string{moved[1].String()}
		if id == old[0] {
			want = []string{moved[0].String(), moved[1].String()}
		}
		for _, k := range want {
			if !slices.Contains(drops, k) {
				t.Errorf("node %d, back, was told to drop %v; want %s among them (decided while it was away)", id, drops, k)
			}
		}
	}
	if len(c.tierDropsAway) != 0 {
		t.Errorf("drops kept for nodes that are back: %v", c.tierDropsAway)
	}
}

// A repository is short of replicas when fewer than --full-replicas of its
// confirmed copies are healthy: a copy on a full node whose session was
// cut (suspect, within its grace) serves nothing, and one whose refs have
// been behind for longer than a pull takes does not serve the verified
// state. under_replicated (and so the alert) counts them, not only the
// copies the tier stopped counting.
func TestRepositoriesWithFewerHealthyReplicasThanTheyShouldHaveAreUnderReplicated(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 4, keys)
	ctx := as(full[0])
	under := func() uint32 {
		t.Helper()
		cat, err := c.CatalogStatus(ctx, &fleetv1.CatalogStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return cat.GetUnderReplicated()
	}
	c.mu.Lock()
	c.syncTier()
	for _, s := range keys {
		k := repokey.Key(s)
		for _, id := range c.replicas(k) {
			c.tierConfirm(id, k)
		}
	}
	c.syncTier()
	tierDropsSent(c)
	// healthyShort counts the keys with fewer than two confirmed replicas
	// that are neither on down nor, for key behindKey, on behindOn.
	healthyShort := func(down, behindOn uint32, behindKey repokey.Key) uint32 {
		var n uint32
		for _, s := range keys {
			k := repokey.Key(s)
			_, held, _ := c.tier.ReplicasOf(c.tierUnit(k))
			ok := 0
			for _, id := range held {
				if id != down && (k != behindKey || id != behindOn) {
					ok++
				}
			}
			if ok < 2 {
				n++
			}
		}
		return n
	}
	if n := healthyShort(0, 0, ""); n != 0 {
		c.mu.Unlock()
		t.Fatalf("%d repositories short of confirmed replicas once every replica confirmed", n)
	}
	var solo repokey.Key
	for _, s := range keys {
		k := repokey.Key(s)
		if c.nets.Of(k) == "" {
			solo = k
			break
		}
	}
	behindOn := c.replicas(solo)[0]
	c.replicaReport(behindOn, solo, strings.Repeat("ab", 16), c.clk.Now().Add(-repostate.ReplicaBehindAfter-time.Minute))
	c.mu.Unlock()
	if got := under(); got != 1 {
		t.Fatalf("with one replica of %s behind: %d repositories under-replicated, want 1", solo, got)
	}

	c.mu.Lock()
	down := full[3].GetNodeId()
	c.sessionClosed(c.sessions[down])
	want := healthyShort(down, behindOn, solo)
	c.mu.Unlock()
	if want < 2 {
		t.Fatalf("node %d holds replicas of %d repositories: its cut session tests nothing", down, want)
	}
	if got := under(); got != want {
		t.Fatalf("with node %d's session cut (suspect) and %s behind on node %d: %d repositories under-replicated, want %d",
			down, solo, behindOn, got, want)
	}
}
