package fullnode

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/tunnel"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A full node pulls only its share of the full tier: a repository whose
// replicas are other full nodes is not queued, one whose replicas include
// it is, and one with no replicas (fewer full nodes than --full-replicas,
// an older coordinator) is, as when every full node held everything. A
// repository placed elsewhere after its pull was queued is let go.
func TestAFullNodePullsOnlyTheRepositoriesPlacedOnIt(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), Fetchers: 1}},
		slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.n.TestHooks().Close)
	const self = 3
	f.n.TestHooks().Connect(nil, self, "")
	state := func(key string, replicas ...uint32) *fleetv1.RepoState {
		return &fleetv1.RepoState{Key: key, Url: "https://" + key, Owner: 99, State: "ok", Digest: "d1", LastCheckMs: 1e12,
			Replicas: replicas}
	}
	const mine, theirs, everyone, moved = "h.example/a/mine", "h.example/a/theirs", "h.example/a/everyone", "h.example/a/moved"
	f.states([]*fleetv1.RepoState{state(mine, 5, self), state(theirs, 5, 6), state(everyone), state(moved, self, 5)})
	f.states([]*fleetv1.RepoState{state(moved, 5, 6)})

	pending := func(key string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.plan.IsPending(repokey.Key(key))
	}
	for key, want := range map[string]bool{mine: true, theirs: false, everyone: true, moved: false} {
		if got := pending(key); got != want {
			t.Errorf("%s: pull queued %v, want %v", key, got, want)
		}
	}
}

// A request for a repository this full node does not serve goes to a
// replica over the link between full nodes: with no replica but this one
// (or none) it is a 404 as before; with replicas none of which has a link
// to this node, 503 with Retry-After, never a 404 that a client would
// take for an answer.
func TestARelayWithNoReplicaReachableAnswers503WithRetryAfter(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), Fetchers: 1}},
		slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.n.TestHooks().Close)
	const self = 3
	f.n.TestHooks().Connect(nil, self, "")
	f.tunnels = tunnel.NewServer(func(uint32, string) error { return nil }, nil, nil)
	f.relay = f.newRelay(f.tunnels)
	const here, away, none = "h.example/a/here", "h.example/a/away", "h.example/a/none"
	f.states([]*fleetv1.RepoState{
		{Key: here, Url: "https://" + here, Owner: 99, State: "ok", Digest: "d1", Replicas: []uint32{self}},
		{Key: away, Url: "https://" + away, Owner: 99, State: "ok", Digest: "d1", Replicas: []uint32{5, 6}},
		{Key: none, Url: "https://" + none, Owner: 99, State: "ok", Digest: "d1"}})
	for _, k := range []string{here, none} {
		if h := f.relayFor(repokey.Key(k)); h != nil {
			t.Errorf("%s: relayed, want a 404", k)
		}
	}
	h := f.relayFor(repokey.Key(away))
	if h == nil {
		t.Fatalf("%s: no relay, want 503", away)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/"+away+".git/info/refs?service=git-upload-pack", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("%s with no replica reachable: %d (Retry-After %q), want 503 with Retry-After", away, w.Code, w.Header().Get("Retry-After"))
	}
}

// A tier drop ordered on a stale or racing decision never deletes the
// last copy: the copy stays while its state still names this full node,
// and while no other replica serves the verified state (here, none is
// reachable); a drop of a repository removed from the catalog meanwhile
// leaves it to the removal. A drop kept for want of a peer is tried
// again until it is done or no longer due.
func TestATierDropKeepsACopyThatNoOtherReplicaServes(t *testing.T) {
	r := newUpstreamRig(t, Config{})
	f := r.f
	const self = 3
	f.n.TestHooks().Connect(nil, self, "")
	f.tunnels = tunnel.NewServer(func(uint32, string) error { return nil }, nil, nil)
	key := repokey.Key(r.key)
	state := func(replicas ...uint32) {
		f.states([]*fleetv1.RepoState{{Key: r.key, Url: r.up.RepoURL("c"), Owner: rigOwner, State: "ok", Digest: r.old,
			LastCheckMs: r.clk.Now().UnixMilli(), Replicas: replicas}})
	}
	for _, c := range []struct {
		what     string
		replicas []uint32
	}{
		{"its state names this node (a stale drop)", []uint32{self, 5}},
		{"no other replica is reachable", []uint32{5, 6}},
	} {
		state(c.replicas...)
		f.tierDropped(t.Context(), []string{r.key})
		if !f.mirror.Has(key) {
			t.Fatalf("%s: the copy was deleted", c.what)
		}
	}
	if got, _ := f.n.Digest(key); got != r.old {
		t.Errorf("after the drops it kept, the node serves %q, want %q", got, r.old)
	}
	// The coordinator sends a drop once: the one kept for want of a peer is
	// tried again, as long as it is due, and forgotten once the tier places
	// the repository here again.
	kept := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		_, ok := f.keptDrops[key]
		return ok
	}
	if !kept() {
		t.Fatal("a drop kept for want of a peer is not remembered to be tried again")
	}
	f.retryKeptDrops(t.Context())
	if !kept() || !f.mirror.Has(key) {
		t.Fatalf("tried again with still no peer: remembered %v, copy held %v; want both", kept(), f.mirror.Has(key))
	}
	state(self, 5)
	f.retryKeptDrops(t.Context())
	if kept() || !f.mirror.Has(key) {
		t.Fatalf("placed here again: remembered %v, copy held %v; want the drop forgotten and the copy held", kept(), f.mirror.Has(key))
	}
}
