package fullnode

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/node"
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
		return f.plan.IsPending(key)
	}
	for key, want := range map[string]bool{mine: true, theirs: false, everyone: true, moved: false} {
		if got := pending(key); got != want {
			t.Errorf("%s: pull queued %v, want %v", key, got, want)
		}
	}
}
