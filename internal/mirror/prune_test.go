package mirror_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// pruneRig is an upstream repository "a" and a store (reopenable, on data)
// that mirrors it.
type pruneRig struct {
	t    *testing.T
	up   *gittest.Upstreams
	data string
	st   *mirror.Store
	clk  *clock.Fake
	url  string
	key  repokey.Key
}

func newPruneRig(t *testing.T, branches []string, after time.Duration, lim mirror.Limits) *pruneRig {
	t.Helper()
	r := &pruneRig{t: t, data: t.TempDir(), clk: clock.NewFake(time.Now())}
	var err error
	if r.up, err = gittest.Start(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.up.Close)
	if err := r.up.Create("a", branches, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	r.url = r.up.RepoURL("a")
	r.key = keyOf(t, r.url)
	r.open(after, lim)
	r.sync()
	return r
}

// open opens the store on the rig's data directory, as a node's start.
func (r *pruneRig) open(after time.Duration, lim mirror.Limits) {
	r.t.Helper()
	st, err := mirror.Open(r.data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)), mirror.WithClock(r.clk))
	if err != nil {
		r.t.Fatal(err)
	}
	st.SetPruneAfter(after)
	st.SetLimits(lim)
	if _, err := st.Scan(); err != nil {
		r.t.Fatal(err)
	}
	r.st = st
}

func (r *pruneRig) sync() mirror.Result {
	r.t.Helper()
	res, err := r.st.Sync(context.Background(), r.key, r.url)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func (r *pruneRig) bare() string { return filepath.Join(r.up.Dir, "a.git") }

// secret commits a unique blob on branch upstream and returns the commit
// and the blob.
func (r *pruneRig) secret(branch string) (commit, blob string) {
	r.t.Helper()
	commit, err := r.up.AddBlob("a", branch, 3000)
	if err != nil {
		r.t.Fatal(err)
	}
	out, err := gittest.Output("", "--git-dir="+r.bare(), "rev-parse", commit+":big.bin")
	if err != nil {
		r.t.Fatal(err)
	}
	return commit, strings.TrimSpace(out)
}

// upstreamGit runs git in the upstream's bare repository (a force-push, a
// deletion).
func (r *pruneRig) upstreamGit(args ...string) {
	r.t.Helper()
	if err := gittest.Git("", append([]string{"--git-dir=" + r.bare()}, args...)...); err != nil {
		r.t.Fatal(err)
	}
}

// looseBlob writes a unique loose blob that no ref reaches into the mirror.
func (r *pruneRig) looseBlob() string {
	r.t.Helper()
	f := filepath.Join(r.t.TempDir(), "loose")
	if err := os.WriteFile(f, []byte("loose secret "+r.t.Name()+"\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
	out, err := gittest.Output("", "--git-dir="+r.st.Path(r.key), "hash-object", "-w", f)
	if err != nil {
		r.t.Fatal(err)
	}
	oid := strings.TrimSpace(out)
	if _, err := os.Stat(filepath.Join(r.st.Path(r.key), "objects", oid[:2], oid[2:])); err != nil {
		r.t.Fatalf("the blob is not loose: %v", err)
	}
	return oid
}

func (r *pruneRig) has(oid string) bool {
	r.t.Helper()
	ok, err := r.st.HasObject(context.Background(), r.key, oid)
	if err != nil {
		r.t.Fatal(err)
	}
	return ok
}

func (r *pruneRig) marked() bool {
	_, err := os.Stat(filepath.Join(r.st.Path(r.key), "gitfleet-prune"))
	return err == nil
}

// whole checks that the mirror is complete and consistent.
func (r *pruneRig) whole() {
	r.t.Helper()
	dir := r.st.Path(r.key)
	if err := gittest.Git("", "--git-dir="+dir, "rev-list", "--objects", "--all"); err != nil {
		r.t.Fatalf("the pruned mirror misses objects its refs reach: %v", err)
	}
	if err := gittest.Git("", "--git-dir="+dir, "fsck", "--no-dangling", "--strict"); err != nil {
		r.t.Fatalf("fsck of the pruned mirror: %v", err)
	}
	// Nothing unreachable is left, loose or packed.
	out, err := gittest.Output("", "--git-dir="+dir, "fsck", "--unreachable", "--no-reflogs")
	if err != nil {
		r.t.Fatal(err)
	}
	if strings.TrimSpace(out) != "" {
		r.t.Fatalf("unreachable objects left after pruning:\n%s", out)
	}
}

func TestPruneDropsWhatTheUpstreamDropped(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		lim  mirror.Limits // MaxRepoSize makes every fetch a pack (fetch.unpackLimit=1)
		drop func(r *pruneRig, parent string)
	}{
		{"force-push", mirror.Limits{}, func(r *pruneRig, parent string) {
			r.upstreamGit("update-ref", "refs/heads/main", parent)
		}},
		{"force-push, size watched", mirror.Limits{MaxRepoSize: 1 << 30}, func(r *pruneRig, parent string) {
			r.upstreamGit("update-ref", "refs/heads/main", parent)
		}},
		{"deleted branch", mirror.Limits{}, func(r *pruneRig, _ string) {
			r.upstreamGit("update-ref", "-d", "refs/heads/leak")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newPruneRig(t, []string{"main", "leak"}, 0, c.lim)
			branch := "main"
			if strings.HasPrefix(c.name, "deleted") {
				branch = "leak"
			}
			parent, err := gittest.Output("", "--git-dir="+r.bare(), "rev-parse", "refs/heads/"+branch)
			if err != nil {
				t.Fatal(err)
			}
			commit, blob := r.secret(branch)
			r.sync()
			if !r.has(blob) || r.marked() {
				t.Fatalf("after a fast-forward to the secret: has blob %v, marked %v; want true, false", r.has(blob), r.marked())
			}
			// A loose object no ref reaches (a fetch of few objects may
			// leave them loose: repack alone keeps them).
			loose := r.looseBlob()
			c.drop(r, strings.TrimSpace(parent))
			r.sync()
			// A killed fetch's .keep on every pack, which a repack would
			// leave alone, with the secret in it.
			packs, _ := filepath.Glob(filepath.Join(r.st.Path(r.key), "objects", "pack", "*.pack"))
			for _, p := range packs {
				if err := os.WriteFile(strings.TrimSuffix(p, ".pack")+".keep", []byte("fetch-pack 1 on a killed host\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if !r.marked() {
				t.Fatal("a fetch that dropped a commit did not mark the mirror")
			}
			if got := r.st.PrunePending(); len(got) != 1 || got[0] != r.key {
				t.Fatalf("pending prunes = %v, want [%s]", got, r.key)
			}
			if n := r.st.PruneDue(context.Background()); n != 1 {
				t.Fatalf("pruned %d mirrors, want 1", n)
			}
			if r.has(blob) || r.has(commit) || r.has(loose) {
				t.Fatalf("after pruning: has blob %v, commit %v, loose blob %v; want all gone", r.has(blob), r.has(commit), r.has(loose))
			}
			if r.marked() || len(r.st.PrunePending()) != 0 {
				t.Fatal("the mark outlived the pruning")
			}
			r.whole()
			if _, err := os.Stat(filepath.Join(r.st.Path(r.key), "objects", "pack")); err != nil {
				t.Fatal(err)
			}
			if m, _ := filepath.Glob(filepath.Join(r.st.Path(r.key), "objects", "pack", "*.bitmap")); len(m) != 1 {
				t.Fatalf("bitmaps after pruning: %v, want one", m)
			}
			// The mirror still follows its upstream.
			tip, err := r.up.Commit("a", "main")
			if err != nil {
				t.Fatal(err)
			}
			if got := r.sync().After.Refs["refs/heads/main"]; got != tip {
				t.Fatalf("main after pruning and a new commit = %s, want %s", got, tip)
			}
		})
	}
}

func TestPruneFastForwardAndNewRefsDoNotMark(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main"}, 0, mirror.Limits{})
	if _, err := r.up.Commit("a", "main"); err != nil {
		t.Fatal(err)
	}
	r.upstreamGit("branch", "new", "main")
	r.upstreamGit("tag", "v2", "main")
	if res := r.sync(); !res.Changed {
		t.Fatal("the fetch changed nothing")
	}
	if r.marked() || len(r.st.PrunePending()) != 0 {
		t.Fatal("a fast-forward and new refs marked the mirror")
	}
}

func TestPruneMovedTagMarks(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main"}, 0, mirror.Limits{})
	old, err := gittest.Output("", "--git-dir="+r.bare(), "rev-parse", "refs/tags/v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.up.Commit("a", "main"); err != nil {
		t.Fatal(err)
	}
	r.upstreamGit("tag", "-f", "-a", "-m", "moved", "v1", "main")
	r.sync()
	if !r.marked() {
		t.Fatal("a moved tag did not mark the mirror")
	}
	r.st.PruneDue(context.Background())
	if r.has(strings.TrimSpace(old)) {
		t.Fatal("the old tag object is still in the mirror")
	}
	r.whole()
}

func TestPruneWaitsForItsBoundAndSurvivesARestart(t *testing.T) {
	t.Parallel()
	const after = time.Hour
	r := newPruneRig(t, []string{"main"}, after, mirror.Limits{})
	parent, err := gittest.Output("", "--git-dir="+r.bare(), "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	_, blob := r.secret("main")
	r.sync()
	r.upstreamGit("update-ref", "refs/heads/main", strings.TrimSpace(parent))
	r.sync()
	if n := r.st.PruneDue(context.Background()); n != 0 || !r.has(blob) {
		t.Fatalf("before the bound: pruned %d, has blob %v; want 0, true", n, r.has(blob))
	}

	// A restart: a new store on the same data finds the mark.
	r.clk.Advance(after / 2)
	r.open(after, mirror.Limits{})
	if got := r.st.PrunePending(); len(got) != 1 {
		t.Fatalf("pending prunes after a restart = %v, want one", got)
	}
	// Another rewrite does not push the bound back.
	if _, err := r.up.Commit("a", "main"); err != nil {
		t.Fatal(err)
	}
	r.upstreamGit("update-ref", "refs/heads/main", strings.TrimSpace(parent))
	r.sync()
	if n := r.st.PruneDue(context.Background()); n != 0 {
		t.Fatalf("pruned %d before the bound", n)
	}
	r.clk.Advance(after/2 + time.Second)
	if n := r.st.PruneDue(context.Background()); n != 1 {
		t.Fatalf("pruned %d at the bound, want 1", n)
	}
	if r.has(blob) {
		t.Fatal("the secret blob outlived the bound")
	}
	r.whole()
}

func TestPrunerRunsInTheBackground(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main"}, 0, mirror.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.st.RunPruner(ctx) }()
	defer func() { cancel(); <-done }()
	parent, err := gittest.Output("", "--git-dir="+r.bare(), "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	_, blob := r.secret("main")
	r.sync()
	r.upstreamGit("update-ref", "refs/heads/main", strings.TrimSpace(parent))
	r.sync()
	deadline := time.Now().Add(time.Minute)
	for r.has(blob) || r.marked() {
		if time.Now().After(deadline) {
			t.Fatal("the pruner did not prune a marked mirror")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPullVerifiedRewindMarks(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	r.follow()
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	r.st.SetPruneAfter(0)
	up := filepath.Join(r.up.Dir, "a.git")
	parent, err := gittest.Output("", "--git-dir="+up, "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	commit, err := r.up.AddBlob("a", "main", 3000)
	if err != nil {
		t.Fatal(err)
	}
	r.follow()
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	if len(r.st.PrunePending()) != 0 {
		t.Fatal("a fast-forward pull marked the mirror")
	}
	if err := gittest.Git("", "--git-dir="+up, "update-ref", "refs/heads/main", strings.TrimSpace(parent)); err != nil {
		t.Fatal(err)
	}
	r.follow()
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	if got := r.st.PrunePending(); len(got) != 1 {
		t.Fatalf("pending prunes after a rewinding pull = %v, want one", got)
	}
	r.st.PruneDue(context.Background())
	if ok, err := r.st.HasObject(context.Background(), r.key, commit); err != nil || ok {
		t.Fatalf("the dropped commit after pruning: has %v (%v), want gone", ok, err)
	}
}

// The mark written ahead of a fetch that will move a ref goes when the
// fetch fails and the refs did not move, and stays for a rewrite.
func TestPruneMarkAheadOfAFailedFetch(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main"}, time.Hour, mirror.Limits{})
	parent, err := gittest.Output("", "--git-dir="+r.bare(), "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.up.Commit("a", "main"); err != nil {
		t.Fatal(err)
	}
	r.sync()
	r.upstreamGit("update-ref", "refs/heads/main", strings.TrimSpace(parent))
	// A young lock (a git that runs) makes the fetch fail, the refs as
	// they were.
	lock := filepath.Join(r.st.Path(r.key), "refs", "heads", "main.lock")
	if err := os.WriteFile(lock, []byte("held\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Sync(context.Background(), r.key, r.url); err == nil {
		t.Fatal("a fetch through a held lock succeeded")
	}
	if r.marked() || len(r.st.PrunePending()) != 0 {
		t.Fatal("a failed fetch that moved no ref left a mark")
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if !r.marked() || len(r.st.PrunePending()) != 1 {
		t.Fatal("the rewrite did not mark the mirror")
	}
}
