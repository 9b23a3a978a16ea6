package fullnode

import (
	"errors"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repoview"
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
		return f.pending[key]
	}
	f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 1}})
	if !pending() {
		t.Fatal("a new digest of the owner's is not pulled")
	}
	// What pullLoop records of a pull over a limit.
	f.mu.Lock()
	delete(f.pending, key)
	f.overLimit[key] = "d1"
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

// After a pull over a limit, the owner's digest is not pulled again on a
// timer, whether the upstream fetch that followed it failed or worked; a
// plain failure backs off and is tried again.
func TestAnOversizedPullIsNotRetriedWhateverTheUpstreamAnswered(t *testing.T) {
	view, _ := repoview.New()
	f := &Node{clk: clock.NewFake(time.Unix(1e9, 0)), view: view, pending: map[string]bool{}, retryAt: map[string]time.Time{},
		pullFails: map[string]int{}, overLimit: map[string]string{}}
	st := &fleetv1.RepoState{Key: "example.com/team/big", Owner: 2, Digest: "d1"}
	upstreamDown := errors.New("fetch from the upstream: connection refused")
	for _, upstream := range []error{upstreamDown, nil} {
		f.overLimit[st.Key] = st.Digest // as pullTooLarge notes it
		f.settlePull(st.Key, st, upstream)
		if f.pending[st.Key] || !f.retryAt[st.Key].IsZero() || f.overLimit[st.Key] != "d1" {
			t.Fatalf("upstream %v: pending %v, retry at %v, over limit %q: want no retry and d1 kept",
				upstream, f.pending[st.Key], f.retryAt[st.Key], f.overLimit[st.Key])
		}
	}
	delete(f.overLimit, st.Key)
	f.settlePull(st.Key, st, upstreamDown)
	if !f.pending[st.Key] || f.retryAt[st.Key].IsZero() {
		t.Fatal("a failed pull under the limits is not tried again")
	}
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
		return f.pending[key]
	}
	f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 1}})
	if !pending() {
		t.Fatal("a new digest of the owner's is not pulled")
	}
	// What a pull of d1 leaves.
	f.mu.Lock()
	delete(f.pending, key)
	f.mu.Unlock()
	f.n.SetDigest(key, "d1")
	for _, nw := range []string{"root:0123", "forks"} {
		f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 1, Network: nw}})
		if !pending() {
			t.Fatalf("the network %q set on a pulled repository is not pulled into", nw)
		}
		f.mu.Lock()
		delete(f.pending, key)
		f.mu.Unlock()
		f.states([]*fleetv1.RepoState{{Key: key, Owner: 2, Digest: "d1", LastCheckMs: 2, Network: nw}})
		if pending() {
			t.Fatalf("a state of the same network %q and digest pulls again", nw)
		}
	}
}
