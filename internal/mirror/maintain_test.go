package mirror_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

const week = 7 * 24 * time.Hour

func TestNeedOf(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	kept := mirror.Shape{Packs: 1, Bitmap: true, CommitGraph: true, LastRun: now.Add(-time.Hour), LastFull: now.Add(-time.Hour)}
	with := func(f func(*mirror.Shape)) mirror.Shape { s := kept; f(&s); return s }
	cases := []struct {
		name     string
		sh       mirror.Shape
		due      bool
		full     bool
		moreThan float64 // the score is above this
	}{
		{"just maintained", kept, false, false, -1},
		{"empty repository", mirror.Shape{}, false, false, -1},
		{"a fresh clone: never maintained", mirror.Shape{Packs: 1}, true, true, 0.99},
		{"a few new packs", with(func(s *mirror.Shape) { s.Packs, s.NewPacks = 4, 3 }), false, false, 0.3},
		{"eight new packs", with(func(s *mirror.Shape) { s.Packs, s.NewPacks = 9, 8 }), true, false, 0.99},
		{"200 new packs outrank eight", with(func(s *mirror.Shape) { s.Packs, s.NewPacks = 201, 200 }), true, false, 20},
		{"64 loose objects", with(func(s *mirror.Shape) { s.Loose = 64 }), true, false, 0.99},
		{"no commit graph", with(func(s *mirror.Shape) { s.CommitGraph = false }), true, false, 0.99},
		{"no bitmap", with(func(s *mirror.Shape) { s.Bitmap = false }), true, false, 0.99},
		{"a week since the last full run, a fetch since", with(func(s *mirror.Shape) { s.LastFull, s.Packs, s.NewPacks = now.Add(-week), 2, 1 }), true, true, 0.99},
		{"a week since the last full run, an incremental one since", with(func(s *mirror.Shape) { s.LastFull = now.Add(-week) }), true, true, 0.99},
		{"a week since the last full run, nothing since", with(func(s *mirror.Shape) { s.LastRun, s.LastFull = now.Add(-week), now.Add(-week) }), false, false, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := mirror.NeedOf(c.sh, now, week)
			if n.Due() != c.due || n.Full != c.full || n.Score <= c.moreThan {
				t.Fatalf("NeedOf = %+v (due %v); want due %v, full %v, score > %v", n, n.Due(), c.due, c.full, c.moreThan)
			}
		})
	}
}

// fetches makes n commits upstream, each followed by a sync of the mirror:
// n small fetches.
func (r *pruneRig) fetches(n int) {
	r.t.Helper()
	for i := 0; i < n; i++ {
		if _, err := r.up.Commit("a", "main"); err != nil {
			r.t.Fatal(err)
		}
		r.sync()
	}
}

// unmaintained makes the mirror what a gitfleet that did not maintain
// first mirrors at once left on disk, and an upgrade finds: no record of
// a run, no multi-pack index or bitmap, no commit graph.
func (r *pruneRig) unmaintained() {
	r.t.Helper()
	dir := r.st.Path(r.key)
	files, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "multi-pack-index*"))
	bitmaps, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.bitmap"))
	files = append(append(files, bitmaps...), filepath.Join(dir, "gitfleet-maintained"))
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			r.t.Fatal(err)
		}
	}
	for _, d := range []string{"commit-graph", "commit-graphs"} {
		if err := os.RemoveAll(filepath.Join(dir, "objects", "info", d)); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *pruneRig) probe() mirror.Shape {
	r.t.Helper()
	sh, err := r.st.Probe(r.key)
	if err != nil {
		r.t.Fatal(err)
	}
	return sh
}

func (r *pruneRig) maintain() mirror.MaintenanceReport {
	r.t.Helper()
	rep, err := r.st.Maintain(context.Background(), r.key, week)
	if err != nil {
		r.t.Fatal(err)
	}
	return rep
}

// servedAsUpstream checks that the mirror's refs are the upstream's and
// that git fsck finds it whole.
func (r *pruneRig) servedAsUpstream() {
	r.t.Helper()
	want, err := r.up.Refs("a")
	if err != nil {
		r.t.Fatal(err)
	}
	got, err := gittest.RefsOf(r.st.Path(r.key))
	if err != nil {
		r.t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		r.t.Fatalf("mirror refs %v, upstream %v", got, want)
	}
	if err := gittest.Git("", "--git-dir="+r.st.Path(r.key), "fsck", "--no-dangling", "--strict"); err != nil {
		r.t.Fatalf("fsck after maintenance: %v", err)
	}
	if err := gittest.Git("", "--git-dir="+r.st.Path(r.key), "commit-graph", "verify"); err != nil {
		r.t.Fatalf("commit-graph verify after maintenance: %v", err)
	}
}

func TestMaintenanceAfterManyFetchesLeavesFewPacksABitmapAndACommitGraph(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main", "dev"}, time.Hour, mirror.Limits{})
	r.unmaintained() // cloned before an upgrade
	r.fetches(6)
	r.looseBlob() // as a fetch under git's unpack limit leaves them
	sh := r.probe()
	if sh.Loose != 1 || sh.Packs < 6 || !sh.LastRun.IsZero() || sh.CommitGraph {
		t.Fatalf("after 6 small fetches: %+v; want a loose object, 7 packs, never maintained, no commit graph", sh)
	}
	if n := mirror.NeedOf(sh, r.clk.Now(), week); !n.Due() || !n.Full {
		t.Fatalf("need of a mirror never maintained = %+v, want a full run due", n)
	}
	rep := r.maintain()
	if !rep.Ran || !rep.Full {
		t.Fatalf("first run: %+v, want a full run", rep)
	}
	if a := rep.After; a.Loose != 0 || a.Packs != 1 || !a.Bitmap || !a.CommitGraph || !a.LastFull.Equal(r.clk.Now().Truncate(time.Second)) {
		t.Fatalf("after a full run: %+v; want no loose object, one pack, a bitmap, a commit graph, the run recorded", a)
	}
	if n := mirror.NeedOf(rep.After, r.clk.Now(), week); n.Due() {
		t.Fatalf("need just after a run = %+v, want none", n)
	}
	r.servedAsUpstream()

	r.clk.Advance(time.Hour)
	r.open(time.Hour, mirror.Limits{MaxRepoSize: 1 << 30})
	r.fetches(24)
	loose := r.looseBlob()
	sh = r.probe()
	if sh.Packs < 24 || sh.NewPacks < 24 || sh.Loose != 1 {
		t.Fatalf("after 24 fetches of a pack each: %+v; want 25 packs, 24 new, one loose object", sh)
	}
	if n := mirror.NeedOf(sh, r.clk.Now(), week); !n.Due() || n.Full {
		t.Fatalf("need after 24 fetches = %+v, want an incremental run due", n)
	}
	rep = r.maintain()
	if !rep.Ran || rep.Full {
		t.Fatalf("second run: %+v, want an incremental one", rep)
	}
	if a := rep.After; a.Packs > 3 || a.NewPacks != 0 || a.Loose != 0 || !a.Bitmap || !a.CommitGraph {
		t.Fatalf("after an incremental run: %+v; want at most 3 packs, all under a bitmap, no loose object, a commit graph", a)
	}
	if m, _ := filepath.Glob(filepath.Join(r.st.Path(r.key), "objects", "pack", "multi-pack-index*.bitmap")); len(m) != 1 {
		t.Fatalf("multi-pack-index bitmaps: %v, want one", m)
	}
	if _, err := os.Stat(filepath.Join(r.st.Path(r.key), "packed-refs")); err != nil {
		t.Fatalf("refs not packed: %v", err)
	}
	if !r.has(loose) {
		t.Fatal("an incremental run dropped a loose object: only full runs and the pruner may")
	}
	r.servedAsUpstream()
	// The mirror still follows its upstream.
	r.fetches(1)
	r.servedAsUpstream()
}

func TestMaintenanceFullRunDropsWhatNoRefReaches(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main"}, week, mirror.Limits{MaxRepoSize: 1 << 30})
	r.maintain() // the first run, full
	parent, err := gittest.Output("", "--git-dir="+r.bare(), "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	commit, blob := r.secret("main")
	r.sync()
	loose := r.looseBlob()
	r.upstreamGit("update-ref", "refs/heads/main", strings.TrimSpace(parent)) // the secret force-pushed away
	r.sync()
	r.fetches(3)
	r.clk.Advance(time.Hour)
	if rep := r.maintain(); rep.Full {
		t.Fatalf("a run an hour after a full one was full: %+v", rep)
	}
	// An incremental run keeps what nothing reaches (the pruner, or the
	// next full run, drops it).
	if !r.has(blob) || !r.has(commit) {
		t.Fatal("an incremental run dropped objects: only full runs and the pruner may")
	}
	r.clk.Advance(week)
	rep := r.maintain()
	if !rep.Full {
		t.Fatalf("a run a week after the last full one: %+v, want full", rep)
	}
	if r.has(blob) || r.has(commit) || r.has(loose) {
		t.Fatalf("after a full run: has blob %v, commit %v, loose blob %v; want all gone", r.has(blob), r.has(commit), r.has(loose))
	}
	r.whole()
	r.servedAsUpstream()
}

func TestPruneRewritesTheCommitGraphOfAMaintainedMirror(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main"}, 0, mirror.Limits{MaxRepoSize: 1 << 30})
	parent, err := gittest.Output("", "--git-dir="+r.bare(), "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	commit, _ := r.secret("main")
	r.sync()
	r.maintain() // the secret's commit is in the commit graph
	r.upstreamGit("update-ref", "refs/heads/main", strings.TrimSpace(parent))
	r.sync()
	if n := r.st.PruneDue(context.Background()); n != 1 {
		t.Fatalf("pruned %d mirrors, want 1", n)
	}
	if r.has(commit) {
		t.Fatal("the force-pushed commit is still there")
	}
	r.whole()
	r.servedAsUpstream() // commit-graph verify: the graph names no pruned commit
	if sh := r.probe(); !sh.LastFull.Equal(r.clk.Now().Truncate(time.Second)) {
		t.Fatalf("a prune is a full repack, but the mirror's last full run is %v", sh.LastFull)
	}
}

// TestClonesAndFetchesDuringMaintenancePassFsck clones the mirror over and
// over (git upload-pack, as the full node serves it) while it is fetched
// and maintained, incremental and full runs in turn, and checks every
// clone with git fsck.
func TestClonesAndFetchesDuringMaintenancePassFsck(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main", "dev"}, time.Hour, mirror.Limits{MaxRepoSize: 1 << 30})
	for i := 0; i < 3; i++ { // some history of some size to pack
		if _, err := r.up.AddBlob("a", "dev", 256<<10); err != nil {
			t.Fatal(err)
		}
	}
	r.sync()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var runs, full, fetched atomic.Int64
	errs := make(chan error, 3)
	wg.Add(2)
	go func() { // fetches
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := r.up.Commit("a", "main"); err != nil {
				errs <- err
				return
			}
			if _, err := r.st.Sync(ctx, r.key, r.url); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("fetch during maintenance: %w", err)
				return
			}
			fetched.Add(1)
		}
	}()
	go func() { // maintenance, back to back; every third run a full one
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			interval := week
			if i%3 == 2 {
				interval = time.Nanosecond
			}
			rep, err := r.st.Maintain(ctx, r.key, interval)
			if err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("maintenance run %d: %w", i, err)
				return
			}
			if rep.Ran {
				runs.Add(1)
				if rep.Full {
					full.Add(1)
				}
			}
		}
	}()
	src := "file://" + r.st.Path(r.key)
	clones := 0
	for ; clones < 16 || runs.Load() < 6 || full.Load() < 2; clones++ {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		if clones > 200 {
			t.Fatalf("maintenance made %d runs (%d full) in 200 clones", runs.Load(), full.Load())
		}
		dst := filepath.Join(t.TempDir(), "clone.git")
		if err := gittest.Git("", "clone", "-q", "--bare", "--no-local", src, dst); err != nil {
			t.Fatalf("clone %d during maintenance: %v", clones, err)
		}
		if err := gittest.Git("", "--git-dir="+dst, "fsck", "--strict", "--no-dangling"); err != nil {
			t.Fatalf("fsck of clone %d during maintenance: %v", clones, err)
		}
		_ = os.RemoveAll(dst)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d clones checked during %d maintenance runs (%d full) and %d fetches", clones, runs.Load(), full.Load(), fetched.Load())
	r.sync()
	r.maintain()
	r.servedAsUpstream()
}

// A packed-refs.lock held by another process (an operator's git in the
// data directory) does not fail maintenance, nor let it drop anything:
// the run is an incremental one (a full one is left for later), the refs
// stay loose for the next run, and the lock is left to its owner.
func TestMaintenanceWithPackedRefsHeldElsewherePacksTheObjects(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main", "dev"}, time.Hour, mirror.Limits{})
	r.unmaintained() // cloned before an upgrade
	r.fetches(4)
	lock := filepath.Join(r.st.Path(r.key), "packed-refs.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(lock, r.clk.Now(), r.clk.Now()); err != nil { // young: not a killed git's
		t.Fatal(err)
	}
	rep := r.maintain() // never maintained: a full run is due
	if !rep.Ran || rep.Full || rep.After.Packs >= rep.Before.Packs || !rep.After.LastFull.IsZero() {
		t.Fatalf("with packed-refs locked elsewhere: %+v, want an incremental run that packed objects", rep)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("another process's lock was removed: %v", err)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	r.servedAsUpstream()
}

// A maintenance stopped by its context (a shutdown kills its git) leaves
// no lock file behind: the next run is a full one, not a failure until the
// locks are old enough to be called stale. (The flake of
// TestClonesAndFetchesDuringMaintenancePassFsck: its last run followed a
// run killed by the test's cancel.)
func TestAStoppedMaintenanceLeavesNoLockBehind(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main", "dev"}, time.Hour, mirror.Limits{})
	r.unmaintained() // cloned before an upgrade
	r.fetches(3)
	dir := r.st.Path(r.key)
	locks := []string{"packed-refs.lock", "packed-refs.new", "objects/pack/multi-pack-index.lock", "objects/info/commit-graph.lock"}
	for _, l := range locks { // what a git killed mid-run leaves
		p := filepath.Join(dir, filepath.FromSlash(l))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, r.clk.Now(), r.clk.Now()); err != nil { // young
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.st.Maintain(ctx, r.key, week); err == nil {
		t.Fatal("a stopped maintenance reported no error")
	}
	for _, l := range locks {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(l))); err == nil {
			t.Errorf("%s left after a stopped maintenance", l)
		}
	}
	if rep := r.maintain(); !rep.Ran || !rep.Full {
		t.Fatalf("the run after a stopped one: %+v, want a full run", rep)
	}
	r.servedAsUpstream()
}
