package mirror_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

func limited(t *testing.T, data string, l mirror.Limits, log io.Writer) *mirror.Store {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	st, err := mirror.Open(data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	st.SetLimits(l)
	return st
}

func upstreams(t *testing.T) *gittest.Upstreams {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	return up
}

func slow(t *testing.T, up *gittest.Upstreams, rate int) *gittest.Slow {
	t.Helper()
	s, err := up.StartSlow(rate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// treeBytes is the size of the files under dir.
func treeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

const (
	pack  = 8 << 20 // the big repository's blob: incompressible
	limit = 1 << 20 // --max-repo-size in these tests
	rate  = 2 << 20 // the slow server: 2 MiB/s, so the whole pack takes 4 s
)

// A clone of a repository larger than --max-repo-size is stopped while the
// pack streams in: the server sent much less than the pack, and nothing of
// it is left on disk.
func TestCloneLargerThanMaxRepoSizeIsStoppedWhileThePackStreams(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("big", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := up.AddBlob("big", "main", pack); err != nil {
		t.Fatal(err)
	}
	srv := slow(t, up, rate)
	data := t.TempDir()
	st := limited(t, data, mirror.Limits{MaxRepoSize: limit, WatchInterval: 20 * time.Millisecond}, nil)
	url := srv.RepoURL("big")
	key := keyOf(t, url)

	// Watch the disk from outside as well: the clone's directory never
	// holds much more than the limit.
	var peak int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				peak = max(peak, treeBytes(t, filepath.Join(data, "tmp")))
			}
		}
	}()
	_, err := st.Sync(context.Background(), key, url)
	close(stop)
	wg.Wait()
	if gitcmd.ClassOf(err) != gitcmd.ClassTooLarge {
		t.Fatalf("Sync: %v, want class %s", err, gitcmd.ClassTooLarge)
	}
	t.Logf("sent %d of %d bytes; peak on disk %d, limit %d", srv.Sent.Load(), pack, peak, limit)
	if sent := srv.Sent.Load(); sent > pack/2 {
		t.Fatalf("the server sent %d bytes of an %d-byte pack before the clone was stopped", sent, pack)
	}
	if peak > 2*limit {
		t.Fatalf("the clone held %d bytes on disk, limit %d", peak, limit)
	}
	if st.Has(key) {
		t.Fatal("a clone over the limit was kept")
	}
	if left := entries(t, filepath.Join(data, "tmp")); len(left) != 0 {
		t.Fatalf("left in tmp: %v", left)
	}
	if !strings.Contains(err.Error(), "max-repo-size") {
		t.Fatalf("the error does not name the limit: %v", err)
	}
}

// A fetch into an existing mirror that would pass the limit is stopped, and
// the mirror is left as it was: same refs, no partial pack.
func TestFetchThatWouldPassMaxRepoSizeLeavesTheMirrorAsItWas(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("grows", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	srv := slow(t, up, rate)
	data := t.TempDir()
	st := limited(t, data, mirror.Limits{MaxRepoSize: limit, WatchInterval: 20 * time.Millisecond}, nil)
	url := srv.RepoURL("grows")
	key := keyOf(t, url)
	ctx := context.Background()
	before, err := st.Sync(ctx, key, url)
	if err != nil {
		t.Fatal(err)
	}
	packs := entries(t, filepath.Join(st.Path(key), "objects", "pack"))
	if _, err := up.AddBlob("grows", "main", pack); err != nil {
		t.Fatal(err)
	}
	sentBefore := srv.Sent.Load()
	_, err = st.Sync(ctx, key, url)
	if gitcmd.ClassOf(err) != gitcmd.ClassTooLarge {
		t.Fatalf("Sync: %v, want class %s", err, gitcmd.ClassTooLarge)
	}
	if sent := srv.Sent.Load() - sentBefore; sent > pack/2 {
		t.Fatalf("the server sent %d bytes of an %d-byte pack", sent, pack)
	}
	refs, err := st.Refs(ctx, key)
	if err != nil || !reflect.DeepEqual(refs.Refs, before.After.Refs) {
		t.Fatalf("refs after the stopped fetch = %v, %v; want %v", refs.Refs, err, before.After.Refs)
	}
	if now := entries(t, filepath.Join(st.Path(key), "objects", "pack")); !reflect.DeepEqual(now, packs) {
		t.Fatalf("objects/pack was %v, is %v", packs, now)
	}
	if size := treeBytes(t, st.Path(key)); size > limit {
		t.Fatalf("the mirror holds %d bytes", size)
	}
}

// A mirror already over the limit (the limit was lowered) is not fetched
// at all: only the ref listing crosses the network.
func TestMirrorAlreadyOverMaxRepoSizeIsNotFetched(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("fat", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := up.AddBlob("fat", "main", 2*limit); err != nil {
		t.Fatal(err)
	}
	srv := slow(t, up, 64<<20)
	data := t.TempDir()
	url := srv.RepoURL("fat")
	key := keyOf(t, url)
	ctx := context.Background()
	if _, err := limited(t, data, mirror.Limits{}, nil).Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	if _, err := up.AddBlob("fat", "main", limit/2); err != nil {
		t.Fatal(err)
	}
	st := limited(t, data, mirror.Limits{MaxRepoSize: limit}, nil)
	sentBefore := srv.Sent.Load()
	_, err := st.Sync(ctx, key, url)
	if gitcmd.ClassOf(err) != gitcmd.ClassTooLarge {
		t.Fatalf("Sync: %v, want class %s", err, gitcmd.ClassTooLarge)
	}
	if sent := srv.Sent.Load() - sentBefore; sent > 64<<10 {
		t.Fatalf("the server sent %d bytes to a mirror over its limit", sent)
	}
}

// A repository with more branches and tags than --max-refs is refused
// before anything is fetched; refs other than branches and tags do not
// count (they are not asked for).
func TestMoreRefsThanMaxRefsAreRefusedBeforeFetching(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("many", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	var pulls, branches []string
	for i := 0; i < 100; i++ {
		pulls = append(pulls, fmt.Sprintf("refs/pull/%d/head", i))
	}
	if err := up.AddRefs("many", "main", pulls); err != nil {
		t.Fatal(err)
	}
	st := limited(t, t.TempDir(), mirror.Limits{MaxRefs: 50}, nil)
	ctx := context.Background()
	url := up.RepoURL("many")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatalf("1 branch and 100 pull request refs under --max-refs 50: %v", err)
	}
	for i := 0; i < 60; i++ {
		branches = append(branches, fmt.Sprintf("refs/heads/b%02d", i))
	}
	if err := up.AddRefs("many", "main", branches); err != nil {
		t.Fatal(err)
	}
	_, err := st.Sync(ctx, key, url)
	if gitcmd.ClassOf(err) != gitcmd.ClassTooManyRefs {
		t.Fatalf("61 branches under --max-refs 50: %v, want class %s", err, gitcmd.ClassTooManyRefs)
	}
	refs, _ := st.Refs(ctx, key)
	if len(refs.Refs) != 1 {
		t.Fatalf("the mirror has %d refs after a refused fetch", len(refs.Refs))
	}
	// A new clone is refused the same way.
	other := limited(t, t.TempDir(), mirror.Limits{MaxRefs: 50}, nil)
	if _, err := other.Sync(ctx, key, url); gitcmd.ClassOf(err) != gitcmd.ClassTooManyRefs || other.Has(key) {
		t.Fatalf("clone: %v, has=%v", err, other.Has(key))
	}
}

// A 4,000-byte ref name no longer keeps a repository from being mirrored:
// it is skipped (and logged once), and the rest is cloned and fetched.
func TestALongRefNameIsSkippedAndTheRestIsMirrored(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("long", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	long := "refs/heads/" + strings.Repeat("x", 4000)
	if err := up.AddRefs("long", "main", []string{long, "refs/heads/" + strings.Repeat("y/", 600) + "end"}); err != nil {
		t.Fatal(err)
	}
	for _, maxLen := range []int{1024, 0} { // with no length limit, no file system stores a 4,000-byte name
		t.Run(fmt.Sprintf("max-ref-length=%d", maxLen), func(t *testing.T) {
			var log bytes.Buffer
			st := limited(t, t.TempDir(), mirror.Limits{MaxRefLength: maxLen}, &log)
			ctx := context.Background()
			url := up.RepoURL("long")
			key := keyOf(t, url)
			res, err := st.Sync(ctx, key, url)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{"refs/heads/main": true, "refs/heads/dev": true, "refs/tags/v1": true}
			if maxLen == 0 {
				want["refs/heads/"+strings.Repeat("y/", 600)+"end"] = true
			}
			check := func(refs map[string]string) {
				t.Helper()
				if len(refs) != len(want) {
					t.Fatalf("mirrored %d refs, want %d", len(refs), len(want))
				}
				for n := range want {
					if _, ok := refs[n]; !ok {
						t.Fatalf("missing %.60s", n)
					}
				}
			}
			check(res.After.Refs)
			// A later fetch (not a clone) skips it too.
			c, err := up.Commit("long", "dev")
			if err != nil {
				t.Fatal(err)
			}
			res, err = st.Sync(ctx, key, url)
			if err != nil || res.After.Refs["refs/heads/dev"] != c {
				t.Fatalf("fetch: %v, dev at %s want %s", err, res.After.Refs["refs/heads/dev"], c)
			}
			check(res.After.Refs)
			if n := strings.Count(log.String(), "skipping refs"); n != 1 {
				t.Fatalf("the skipped ref was logged %d times, want once:\n%s", n, log.String())
			}
		})
	}
}

// The check lists branches and tags only (no HEAD): HEAD is asked for
// beside every fetch, and the mirror's HEAD follows the upstream's.
func TestHeadFollowsTheUpstreamWhenRefsMove(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("h", []string{"main", "dev"}, nil); err != nil {
		t.Fatal(err)
	}
	st := limited(t, t.TempDir(), mirror.Limits{MaxRefs: 10, MaxRefLength: 1024}, nil)
	ctx := context.Background()
	url := up.RepoURL("h")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	if h := mirrorHead(t, st, key); h != "refs/heads/main" {
		t.Fatalf("HEAD after the clone = %q", h)
	}
	upDir := filepath.Join(up.Dir, "h.git")
	if err := gittest.Git("", "--git-dir="+upDir, "symbolic-ref", "HEAD", "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Commit("h", "dev"); err != nil {
		t.Fatal(err)
	}
	res, err := st.Sync(ctx, key, url)
	if err != nil || !res.Changed {
		t.Fatalf("Sync: %+v, %v", res, err)
	}
	if h := mirrorHead(t, st, key); h != "refs/heads/dev" || res.Before.Head != "refs/heads/main" || res.After.Head != "refs/heads/dev" {
		t.Fatalf("HEAD = %q (result %q -> %q), want refs/heads/dev", h, res.Before.Head, res.After.Head)
	}
	// A new branch made HEAD is followed at once.
	if err := gittest.Git("", "--git-dir="+upDir, "branch", "trunk", "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir="+upDir, "symbolic-ref", "HEAD", "refs/heads/trunk"); err != nil {
		t.Fatal(err)
	}
	res, err = st.Sync(ctx, key, url)
	if err != nil || !res.Changed {
		t.Fatalf("Sync: %+v, %v", res, err)
	}
	if h := mirrorHead(t, st, key); h != "refs/heads/trunk" {
		t.Fatalf("HEAD = %q after a new branch became the upstream's HEAD, want refs/heads/trunk", h)
	}
}

// A default branch switched among existing branches, with no ref moving,
// is followed once the head recheck has passed since the last ask, and
// not asked for before: a quiet check costs the one ref listing.
func TestHeadFollowsTheUpstreamWithNoRefMoving(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("q", []string{"main", "dev"}, nil); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Now())
	st, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.DiscardHandler),
		mirror.WithClock(clk), mirror.WithHeadRecheck(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("q")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir="+filepath.Join(up.Dir, "q.git"), "symbolic-ref", "HEAD", "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	// Within the recheck of the clone: one listing, no ask, HEAD as it was.
	clk.Advance(30 * time.Minute)
	before := up.Requests("q")
	res, err := st.Sync(ctx, key, url)
	if err != nil || res.Changed || res.After.Head != "refs/heads/main" {
		t.Fatalf("Sync within the recheck: %+v, %v", res, err)
	}
	if n := up.Requests("q") - before; n != 2 {
		t.Fatalf("a quiet check within the recheck made %d requests, want 2 (advertisement, ls-refs)", n)
	}
	if h := mirrorHead(t, st, key); h != "refs/heads/main" {
		t.Fatalf("HEAD = %q, asked before the recheck", h)
	}
	// Past it: asked, and followed, though no ref moved.
	clk.Advance(31 * time.Minute)
	before = up.Requests("q")
	res, err = st.Sync(ctx, key, url)
	if err != nil || res.Changed || res.Fetched {
		t.Fatalf("Sync past the recheck: %+v, %v", res, err)
	}
	if res.Before.Head != "refs/heads/main" || res.After.Head != "refs/heads/dev" {
		t.Fatalf("HEAD %q -> %q, want refs/heads/main -> refs/heads/dev", res.Before.Head, res.After.Head)
	}
	if h := mirrorHead(t, st, key); h != "refs/heads/dev" {
		t.Fatalf("HEAD = %q, want refs/heads/dev", h)
	}
	if n := up.Requests("q") - before; n != 4 {
		t.Fatalf("a check that asks HEAD made %d requests, want 4 (two listings)", n)
	}
	// The ask is the last one: the next check within the recheck asks nothing more.
	clk.Advance(10 * time.Minute)
	before = up.Requests("q")
	if res, err := st.Sync(ctx, key, url); err != nil || res.After.Head != "refs/heads/dev" {
		t.Fatalf("Sync: %+v, %v", res, err)
	}
	if n := up.Requests("q") - before; n != 2 {
		t.Fatalf("the check after an ask made %d requests, want 2", n)
	}
	// An urgent check (ExpireHead) asks at once.
	if err := gittest.Git("", "--git-dir="+filepath.Join(up.Dir, "q.git"), "symbolic-ref", "HEAD", "refs/heads/main"); err != nil {
		t.Fatal(err)
	}
	st.ExpireHead(key)
	if res, err := st.Sync(ctx, key, url); err != nil || res.After.Head != "refs/heads/main" {
		t.Fatalf("Sync after ExpireHead: %+v, %v; want HEAD refs/heads/main", res, err)
	}
}

// FollowHead points HEAD at a branch the mirror has, and at nothing else.
func TestFollowHeadTakesOnlyABranchTheMirrorHas(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("f", []string{"main", "dev"}, nil); err != nil {
		t.Fatal(err)
	}
	st := limited(t, t.TempDir(), mirror.Limits{}, nil)
	ctx := context.Background()
	url := up.RepoURL("f")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ head, want string }{
		{"refs/heads/nope", "refs/heads/main"},
		{"refs/tags/v1", "refs/heads/main"},
		{"refs/heads/dev", "refs/heads/dev"},
	} {
		res, err := st.FollowHead(ctx, key, tc.head)
		if err != nil || res.After.Head != tc.want || mirrorHead(t, st, key) != tc.want {
			t.Fatalf("FollowHead(%s): %+v, %v; HEAD %s, want %s", tc.head, res, err, mirrorHead(t, st, key), tc.want)
		}
	}
	if _, err := st.FollowHead(ctx, keyOf(t, up.RepoURL("none")), "refs/heads/main"); err == nil {
		t.Fatal("FollowHead of a key not mirrored succeeded")
	}
}

func mirrorHead(t *testing.T, st *mirror.Store, key repokey.Key) string {
	t.Helper()
	out, err := gittest.Output("", "--git-dir="+st.Path(key), "symbolic-ref", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// A clone that arrives whole between two reads of the watch is still
// refused: it is measured once complete, and discarded.
func TestCloneThatArrivesWithinOneIntervalIsMeasuredWhole(t *testing.T) {
	t.Parallel()
	up := upstreams(t)
	if err := up.Create("quick", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := up.AddBlob("quick", "main", 2*limit); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	st := limited(t, data, mirror.Limits{MaxRepoSize: limit, WatchInterval: time.Hour}, nil)
	url := up.RepoURL("quick")
	key := keyOf(t, url)
	_, err := st.Sync(context.Background(), key, url)
	if gitcmd.ClassOf(err) != gitcmd.ClassTooLarge || st.Has(key) {
		t.Fatalf("Sync: %v, has=%v; want class %s and no mirror", err, st.Has(key), gitcmd.ClassTooLarge)
	}
	if left := entries(t, filepath.Join(data, "tmp")); len(left) != 0 {
		t.Fatalf("left in tmp: %v", left)
	}
}
