package node

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A pull that went over a limit is not tried again for the same digest
// of the owner's (each try could move as much as the limit), only when
// the owner reports another.
func TestAPullOverALimitWaitsForTheOwnersNextDigest(t *testing.T) {
	ms, err := mirror.Open(t.TempDir(), &gitcmd.Runner{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	n := newTestNode()
	n.id, n.mirror, n.digests, n.verify = 1, ms, map[string]string{}, newVerifier(time.Hour)
	f := &fullNode{n: n, view: newViewTable(nil), pending: map[string]bool{}, retryAt: map[string]time.Time{},
		diskWait: map[string]bool{}, overLimit: map[string]string{}, counts: newRepoCounters(), signal: make(chan struct{}, 1)}
	n.full = f
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
