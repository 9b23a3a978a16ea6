package fullnode

import (
	"testing"

	"github.com/gitfleet/gitfleet/internal/pullplan"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A pull that went over a limit is not tried again for the same digest
// of the owner's (each try could move as much as the limit), only when
// the owner reports another.
func TestAPullOverALimitWaitsForTheOwnersNextDigest(t *testing.T) {
	f := benchFullNode(t, 0) // node 0 until it registers: the owner is another node
	const key = "example.com/team/big"
	pending := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.plan.IsPending(key)
	}
	f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 1}})
	if !pending() {
		t.Fatal("a new digest of the owner's is not pulled")
	}
	// What pullLoop records of a pull over a limit.
	f.mu.Lock()
	pull(t, f, key, "d1", pullplan.OverLimit)
	f.mu.Unlock()
	f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 1}})
	if pending() {
		t.Fatal("the owner's next check of the same digest pulls again what went over the limit")
	}
	f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d2", LastCheckMs: 1}})
	if !pending() {
		t.Fatal("the owner's new digest is not pulled")
	}
}

// pull runs key's queued pull of the owner's digest in f's plan to the
// outcome o, as pullLoop does. Caller holds f.mu.
func pull(t *testing.T, f *Node, key repokey.Key, digest string, o pullplan.Outcome) {
	t.Helper()
	if k, ok := f.plan.Next(f.clk.Now()); !ok || k != key {
		t.Fatalf("next pull %q %v, want %s", k, ok, key)
	}
	f.plan.Ended(repokey.Key(key), digest, o, f.clk.Now())
}

// A network that the coordinator sets on a repository the full node holds
// already (found from the full node's roots, or renamed when networks
// merged) is pulled again although the owner's digest did not change: the
// pull puts the mirror in its network's pool, which it would otherwise not
// join until the upstream moves.
func TestANetworkSetOnAPulledRepositoryPullsItIntoThePool(t *testing.T) {
	f := benchFullNode(t, 0)
	const key = "example.com/team/fork"
	pending := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.plan.IsPending(key)
	}
	f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 1}})
	if !pending() {
		t.Fatal("a new digest of the owner's is not pulled")
	}
	// What a pull of d1 leaves.
	f.mu.Lock()
	pull(t, f, key, "d1", pullplan.Pulled)
	f.mu.Unlock()
	f.n.SetDigest(key, "d1")
	for _, nw := range []string{"root:0123", "forks"} {
		f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 1, Network: nw}})
		if !pending() {
			t.Fatalf("the network %q set on a pulled repository is not pulled into", nw)
		}
		f.mu.Lock()
		pull(t, f, key, "d1", pullplan.Pulled)
		f.mu.Unlock()
		f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 2, Network: nw}})
		if pending() {
			t.Fatalf("a state of the same network %q and digest pulls again", nw)
		}
	}
}
