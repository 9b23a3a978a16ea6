package fullnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/node"
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
func classifyRig(t *testing.T, limit int) (*Node, repokey.Key, string) {
	t.Helper()
	f, key, tip, _ := classifyRigUpstream(t, limit)
	return f, key, tip
}

// classifyRigUpstream is classifyRig with the upstream, to change it.
func classifyRigUpstream(t *testing.T, limit int) (*Node, repokey.Key, string, *gittest.Upstreams) {
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
	f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), AllowPrivate: true}, MismatchRevoke: limit},
		log, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.n.TestHooks().Close)
	f.revoke = nil // no coordinator to revoke with: a test sets its own
	k, _, err := repokey.Normalize(up.RepoURL("c"), repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	key := repokey.Key(k)
	res, err := f.mirror.Sync(context.Background(), key, up.RepoURL("c"))
	if err != nil {
		t.Fatal(err)
	}
	return f, key, res.After.Refs["refs/heads/main"], up
}

// Found by the soak (TestSoak): an honest owner checked the upstream while
// main was at a commit, and a new branch at another; the upstream then
// force-pushed main and deleted the branch before the full node pulled.
// Neither commit is in the upstream any more, so no fetch brings them
// into the mirror, but the upstream did have them: the owner was behind,
// not lying, and must not be counted towards its revocation.
func TestClassifyDoesNotCountTipsTheUpstreamRewroteAway(t *testing.T) {
	f, key, old, up := classifyRigUpstream(t, 1)
	revoked := 0
	f.revoke = func(context.Context, uint32, string) error {
		revoked++
		return nil
	}
	seen, err := up.Commit("c", "main") // what the owner fetched
	if err != nil {
		t.Fatal(err)
	}
	bare := up.Dir + "/c.git"
	branch, err := gittest.Output("", "--git-dir", bare, "commit-tree", "-p", seen, "-m", "short-lived", seen+"^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	branch = strings.TrimSpace(branch)
	// The upstream rewrites main to an unrelated commit; the branch it had
	// for a while is gone.
	rewritten, err := gittest.Output("", "--git-dir", bare, "commit-tree", "-m", "rewritten", old+"^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	rewritten = strings.TrimSpace(rewritten)
	if err := gittest.Git("", "--git-dir", bare, "update-ref", "refs/heads/main", rewritten); err != nil {
		t.Fatal(err)
	}
	if _, err := f.mirror.Sync(context.Background(), key, up.RepoURL("c")); err != nil { // as after a mismatch
		t.Fatal(err)
	}
	before := map[string]string{"refs/heads/main": old}
	n := f.classify(context.Background(), key, 5, []mirror.Mismatch{
		{Ref: "refs/heads/main", Tip: seen, Upstream: rewritten},
		{Ref: "refs/heads/short-lived", Tip: branch},
	}, before, nil)
	if n != 0 || f.mismatchCount(5) != 0 || revoked != 0 {
		t.Fatalf("counted %d forged tips (ledger %d, revoked %d times) for commits the upstream had", n, f.mismatchCount(5), revoked)
	}
	// A tip on a ref that the upstream left where the mirror has it is
	// still a forgery when the upstream never had it.
	if n := f.classify(context.Background(), key, 5, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: strings.Repeat("ab", 20), Upstream: rewritten}},
		map[string]string{"refs/heads/main": rewritten}, nil); n != 1 {
		t.Fatalf("a forged tip on an unchanged ref counted %d times, want 1", n)
	}
	if revoked != 1 {
		t.Fatalf("revoked %d times at --mismatch-revoke 1, want 1", revoked)
	}
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
	// A tip the mirror has (the owner was behind) and a deletion are not forgeries.
	before := map[string]string{"refs/heads/main": tip}
	f.classify(ctx, key, 7, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: tip, Upstream: tip}, {Ref: "refs/tags/v1"}}, before, nil)
	if n := f.mismatchCount(7); n != 0 {
		t.Fatalf("counted %d for an honest mismatch", n)
	}
	for i := range 3 {
		forged := fmt.Sprintf("%040x", i+1)
		f.classify(ctx, key, 7, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: forged, Upstream: tip}, {Ref: "refs/heads/dev", Tip: forged}}, before, nil)
	}
	if n := f.mismatchCount(7); n != 3 {
		t.Fatalf("count %d, want one per pull of a new forgery (3)", n)
	}
	if len(revoked) != 1 || revoked[0] != 7 {
		t.Fatalf("revoked %v, want node 7 once", revoked)
	}
}

func TestClassifyWithoutARevokeHookOnlyCounts(t *testing.T) {
	f, key, tip := classifyRig(t, 1)
	f.classify(context.Background(), key, 3, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: strings.Repeat("cd", 20), Upstream: tip}},
		map[string]string{"refs/heads/main": tip}, nil)
	if n := f.mismatchCount(3); n != 1 {
		t.Fatalf("count %d", n)
	}
}

func TestClassifyTriesAFailedRevocationAgain(t *testing.T) {
	f, key, tip := classifyRig(t, 1)
	calls := 0
	f.revoke = func(context.Context, uint32, string) error { calls++; return errors.New("coordinator unreachable") }
	for _, forged := range []string{"ef", "fe"} { // two forgeries
		f.classify(context.Background(), key, 4, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: strings.Repeat(forged, 20), Upstream: tip}},
			map[string]string{"refs/heads/main": tip}, nil)
	}
	if calls != 2 {
		t.Fatalf("revoke called %d times, want 2", calls)
	}
}

// Found by the soak (TestSoak -soak-reverts): the upstream took a push
// back (a force-push to the commit the mirror holds) after an honest owner
// fetched it. The ref is where the mirror had it and no upstream ref
// reaches the commit, but the upstream still holds it and serves it by ID:
// not a forgery. A tip the upstream does not hold still is.
func TestClassifyDoesNotCountAPushTheUpstreamTookBack(t *testing.T) {
	f, key, old, up := classifyRigUpstream(t, 1)
	seen, err := up.Commit("c", "main") // what the owner fetched
	if err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir", up.Dir+"/c.git", "update-ref", "refs/heads/main", old); err != nil {
		t.Fatal(err)
	}
	// The upstream is asked as plain git upload-pack serves it (as GitHub
	// does, by ID): gittest's server is gitfleet's own serving, which
	// serves only what its refs reach.
	byID, err := mirror.Open(filepath.Dir(f.mirror.Root()), gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), f.log)
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	upstreamHas := func(ctx context.Context, oid string) (bool, error) {
		asked++
		return byID.UpstreamHas(ctx, key, "file://"+filepath.Join(up.Dir, "c.git"), oid)
	}
	before := map[string]string{"refs/heads/main": old}
	ctx := context.Background()
	if n := f.classify(ctx, key, 6, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: seen, Upstream: old}}, before, upstreamHas); n != 0 || asked != 1 {
		t.Fatalf("a commit the upstream took back counted %d times (the upstream asked %d times)", n, asked)
	}
	if has, _ := f.mirror.HasObject(ctx, key, seen); has {
		t.Fatal("asking the upstream brought the commit into the mirror")
	}
	if n := f.classify(ctx, key, 6, []mirror.Mismatch{{Ref: "refs/heads/main", Tip: strings.Repeat("ab", 20), Upstream: old}}, before, upstreamHas); n != 1 {
		t.Fatalf("a tip the upstream does not hold counted %d times, want 1", n)
	}
}

// The live finding: one forged report, pulled twice at once, counted as
// two mismatches, so that --mismatch-revoke 3 fired after two forgeries.
func TestClassifyCountsAForgeryOncePerNodeRepositoryAndTip(t *testing.T) {
	f, key, tip := classifyRig(t, 3)
	revoked := 0
	f.revoke = func(context.Context, uint32, string) error { revoked++; return nil }
	before := map[string]string{"refs/heads/main": tip}
	forge := func(forged string) []mirror.Mismatch {
		return []mirror.Mismatch{{Ref: "refs/heads/main", Tip: forged, Upstream: tip}}
	}
	first, second := strings.Repeat("ab", 20), strings.Repeat("cd", 20)
	var wg sync.WaitGroup
	for range 2 { // the same report pulled twice at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.classify(context.Background(), key, 9, forge(first), before, nil)
		}()
	}
	wg.Wait()
	f.classify(context.Background(), key, 9, forge(first), before, nil) // and again after a retry
	if n := f.mismatchCount(9); n != 1 {
		t.Fatalf("one forgery counted %d times", n)
	}
	f.classify(context.Background(), key, 9, forge(second), before, nil)
	if n := f.mismatchCount(9); n != 2 || revoked != 0 {
		t.Fatalf("two forgeries: count %d, revoked %d times at --mismatch-revoke 3", n, revoked)
	}
	// Another node serving the same forged tip is its own fault.
	f.classify(context.Background(), key, 10, forge(first), before, nil)
	if n := f.mismatchCount(10); n != 1 {
		t.Fatalf("another node's forgery counted %d times", n)
	}
}

// An owner that serves a ref the upstream never had, at a commit the
// upstream never had, is counted as for a forged tip; a ref the upstream
// created and deleted meanwhile, at a commit it still holds, is not.
func TestClassifyCountsInjectedRefsTheUpstreamNeverHad(t *testing.T) {
	f, key, tip, up := classifyRigUpstream(t, 1)
	revoked := 0
	f.revoke = func(context.Context, uint32, string) error { revoked++; return nil }
	bare := filepath.Join(up.Dir, "c.git")
	shortLived, err := gittest.Output("", "--git-dir", bare, "commit-tree", "-p", tip, "-m", "short-lived", tip+"^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	shortLived = strings.TrimSpace(shortLived)
	// Asked as plain git serves objects by ID (see TestClassifyDoesNotCountAPushTheUpstreamTookBack).
	byID, err := mirror.Open(filepath.Dir(f.mirror.Root()), gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), f.log)
	if err != nil {
		t.Fatal(err)
	}
	upstreamHas := func(ctx context.Context, oid string) (bool, error) {
		return byID.UpstreamHas(ctx, key, "file://"+bare, oid)
	}
	ctx := context.Background()
	before := map[string]string{"refs/heads/main": tip}
	if n := f.classify(ctx, key, 8, []mirror.Mismatch{{Ref: "refs/heads/short-lived", Tip: shortLived}}, before, upstreamHas); n != 0 {
		t.Fatalf("a branch the upstream had for a while counted %d times", n)
	}
	if n := f.classify(ctx, key, 8, []mirror.Mismatch{{Ref: "refs/heads/injected", Tip: strings.Repeat("ef", 20)}}, before, upstreamHas); n != 1 {
		t.Fatalf("an injected ref counted %d times, want 1", n)
	}
	if f.mismatchCount(8) != 1 || revoked != 1 {
		t.Fatalf("an injected ref: count %d, revoked %d times at --mismatch-revoke 1", f.mismatchCount(8), revoked)
	}
}

// A pull refused for a forged tip shows in the history as failed, with its
// class, not as the fetch from the upstream that replaced it.
func TestARefusedPullIsLoggedAsFailedWithItsClass(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	mm := &mirror.MismatchError{Key: "h/a", Mismatches: []mirror.Mismatch{{Ref: "refs/heads/main", Tip: strings.Repeat("ab", 20)}}}
	for _, c := range []struct {
		forged int
		class  string
	}{{1, "forged refs"}, {0, "refs differ from the upstream"}} {
		e := refusedEntry("h/a", 1, start, &pullRefusal{owner: 4, mismatch: mm, forged: c.forged, at: start.Add(time.Second)})
		if e.Result != fetchlog.ResultFailed || e.ErrorClass != c.class || e.Kind != "pull" || e.From != 4 || e.DurationMs != 1000 {
			t.Fatalf("%d forged tips: %+v, want a failed pull from node 4 of class %q", c.forged, e, c.class)
		}
	}
}
