package coordinator

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Each replica's state follows what it reports: not confirmed until it
// holds the repository; once the recorded digest changes, each replica
// differs until its pull reports the new one; one that still differs
// after a pull's time is behind, counted in the catalog's status and
// listed for a repair, and the full nodes are sent which replica differs
// and since when. A repository whose replicas all hold the recorded state
// is sent none, and kept in no table.
func TestAReplicaWhoseDigestDiffersFromTheRecordedOneIsBehindAfterAPullsTime(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	clk := c.clk.(*clock.Fake)
	keys := tierKeys()
	part := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "p", Capacity: 100})
	full := tierFleet(t, c, 3, keys)
	key := keys[0]
	d1, d2 := strings.Repeat("1", 32), strings.Repeat("2", 32)
	c.mu.Lock()
	connect(c, part)
	c.setMembers()
	c.decide()
	_, owner := c.owner(repokey.Key(key)) // the owner it is cloning for
	c.result(owner, &fleetv1.CheckResult{Key: key, Ok: true, Cloned: true})
	c.syncTier()
	replicas := c.replicas(repokey.Key(key))
	c.mu.Unlock()
	if owner == 0 || len(replicas) != 2 {
		t.Fatalf("%s: owner %d, replicas %v; want an owner and two replicas", key, owner, replicas)
	}
	a, b := replicas[0], replicas[1]
	check := func(digest string) {
		c.mu.Lock()
		c.result(owner, &fleetv1.CheckResult{Key: key, Ok: true, Changed: true, Digest: digest, CheckedAtMs: clk.Now().UnixMilli()})
		c.mu.Unlock()
	}
	pull := func(id uint32, digest string) {
		c.mu.Lock()
		c.result(id, &fleetv1.CheckResult{Key: key, Ok: true, Served: true, Digest: digest, CheckedAtMs: clk.Now().UnixMilli()})
		c.mu.Unlock()
	}
	states := func() []*fleetv1.ReplicaState {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := c.sessions[full[0].GetNodeId()]
		s.sweep = append(s.sweep, repokey.Key(key))
		return networkSent(s, key).GetReplicaStates()
	}
	behind := func() (int, []ReplicaBehind) {
		cat, err := c.CatalogStatus(as(full[0]), &fleetv1.CatalogStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return int(cat.GetReplicasBehind()), c.ReplicasBehind(clk.Now())
	}
	nodes := func(rs []*fleetv1.ReplicaState) []uint32 {
		var out []uint32
		for _, r := range rs {
			out = append(out, r.GetNode())
		}
		return out
	}

	check(d1)
	// A full node that came after the first ones holds none of its share
	// yet; one of the first held everything, and has not pulled d1.
	if rs := states(); len(rs) != 2 || !slices.ContainsFunc(rs, func(r *fleetv1.ReplicaState) bool { return !r.GetConfirmed() }) {
		t.Fatalf("before any pull: %v, want both replicas, one not confirmed", rs)
	}
	pull(a, d1)
	pull(b, d1)
	c.mu.Lock()
	kept := len(c.replicaDiffs)
	c.mu.Unlock()
	if rs := states(); rs != nil || kept != 0 {
		t.Fatalf("both replicas hold the recorded state: sent %v, %d kept; want none", rs, kept)
	}

	start := clk.Now()
	check(d2)
	rs := states()
	if !slices.Equal(nodes(rs), []uint32{a, b}) || rs[0].GetDigest() != d1 || rs[0].GetDiffersSinceMs() != start.UnixMilli() || !rs[0].GetConfirmed() {
		t.Fatalf("after the upstream changed: %v, want both replicas confirmed with the old digest, differing since the change", rs)
	}
	pull(a, d2)
	clk.Advance(repostate.ReplicaBehindAfter - time.Second)
	if n, list := behind(); n != 0 || len(list) != 0 {
		t.Fatalf("within a pull's time: %d behind (%v), want none", n, list)
	}
	if rs := states(); !slices.Equal(nodes(rs), []uint32{b}) {
		t.Fatalf("after one replica's pull: %v differ, want only %d", nodes(rs), b)
	}
	clk.Advance(time.Second)
	if n, list := behind(); n != 1 || len(list) != 1 || list[0] != (ReplicaBehind{Key: key, Node: b, Since: time.UnixMilli(start.UnixMilli())}) {
		t.Fatalf("a pull's time after the change: %d behind (%v), want %d on %s", n, list, b, key)
	}
	pull(b, d2)
	if n, list := behind(); n != 0 || len(list) != 0 || states() != nil {
		t.Fatalf("after the late replica's pull: %d behind (%v), want none", n, list)
	}
}
