package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestMismatchLedgerRevokesOnceAtTheLimit(t *testing.T) {
	var l mismatchLedger
	for i, want := range []bool{false, false, true, false} {
		if n, revoke := l.add(7, 3); revoke != want || n != uint64(i+1) {
			t.Fatalf("pull %d: count %d, revoke %v; want %d, %v", i+1, n, revoke, i+1, want)
		}
	}
	l.revokeFailed(7)
	if _, revoke := l.add(7, 3); !revoke {
		t.Fatal("a failed revocation is not asked for again")
	}
	if _, revoke := l.add(8, 0); revoke {
		t.Fatal("limit 0 revoked")
	}
	if n, _ := l.add(8, 0); n != 2 {
		t.Fatalf("limit 0 still counts: %d", n)
	}
}

// A full node whose mirror holds one repository from a real upstream.
func classifyRig(t *testing.T, limit int) (*fullNode, string, string) {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("c", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := mirror.Open(t.TempDir(), &gitcmd.Runner{}, log)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := repokey.Normalize(up.RepoURL("c"), repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Sync(context.Background(), key, up.RepoURL("c"))
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: Config{MismatchRevoke: limit}, log: log, mirror: store}
	return &fullNode{n: n}, key, res.After.Refs["refs/heads/main"]
}

func TestClassifyCountsOnlyTipsTheUpstreamNeverHadAndRevokesAtTheLimit(t *testing.T) {
	f, key, tip := classifyRig(t, 2)
	var revoked []uint32
	f.revoke = func(_ context.Context, id uint32, reason string) error {
		if !strings.Contains(reason, "--mismatch-revoke 2") {
			t.Errorf("reason %q", reason)
		}
		revoked = append(revoked, id)
		return nil
	}
	ctx := context.Background()
	forged := strings.Repeat("ab", 20)
	// A tip the mirror has (the owner was behind) and a deletion are not forgeries.
	f.classify(ctx, key, 7, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: tip}, {Ref: "refs/tags/v1"}})
	if n := f.mismatchCount(7); n != 0 {
		t.Fatalf("counted %d for an honest mismatch", n)
	}
	for range 3 {
		f.classify(ctx, key, 7, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: forged}, {Ref: "refs/heads/dev", Tip: forged}})
	}
	if n := f.mismatchCount(7); n != 3 {
		t.Fatalf("count %d, want one per pull (3)", n)
	}
	if len(revoked) != 1 || revoked[0] != 7 {
		t.Fatalf("revoked %v, want node 7 once", revoked)
	}
}

func TestClassifyWithoutARevokeHookOnlyCounts(t *testing.T) {
	f, key, _ := classifyRig(t, 1)
	f.classify(context.Background(), key, 3, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: strings.Repeat("cd", 20)}})
	if n := f.mismatchCount(3); n != 1 {
		t.Fatalf("count %d", n)
	}
}

func TestClassifyTriesAFailedRevocationAgain(t *testing.T) {
	f, key, _ := classifyRig(t, 1)
	calls := 0
	f.revoke = func(context.Context, uint32, string) error { calls++; return errors.New("coordinator unreachable") }
	for range 2 {
		f.classify(context.Background(), key, 4, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: strings.Repeat("ef", 20)}})
	}
	if calls != 2 {
		t.Fatalf("revoke called %d times, want 2", calls)
	}
}
