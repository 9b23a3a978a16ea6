package mirror_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// pullRig is an upstream, a volunteer's copy of it served over HTTP (the
// source, which the test may forge) and a full node's store.
type pullRig struct {
	t        *testing.T
	up, src  *gittest.Upstreams
	data     string
	st       *mirror.Store
	key      repokey.Key
	asked    int // upstream listings
	lastAsk  []string
	upstream mirror.UpstreamRefs
}

func newPullRig(t *testing.T) *pullRig {
	t.Helper()
	r := &pullRig{t: t, data: t.TempDir()}
	var err error
	if r.up, err = gittest.Start(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.up.Close)
	if r.src, err = gittest.Start(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.src.Close)
	if err := r.up.Create("a", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "clone", "-q", "--mirror", filepath.Join(r.up.Dir, "a.git"), r.srcDir()); err != nil {
		t.Fatal(err)
	}
	if r.st, err = mirror.Open(r.data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	r.key = keyOf(t, r.up.RepoURL("a"))
	git := gitcmd.New(gitcmd.Direct(), gitcmd.Options{})
	r.upstream = func(ctx context.Context, names []string) (gitcmd.Refs, error) {
		r.asked++
		r.lastAsk = names
		return git.LsRemoteRefs(ctx, r.up.RepoURL("a"), names)
	}
	return r
}

func (r *pullRig) srcDir() string { return filepath.Join(r.src.Dir, "a.git") }

// follow brings the source up to date with the upstream, as an honest owner.
func (r *pullRig) follow() {
	r.t.Helper()
	if err := gittest.Git(r.srcDir(), "fetch", "-q", "--prune", "origin", "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"); err != nil {
		r.t.Fatal(err)
	}
}

// forge commits on branch of the source only and returns the new tip.
func (r *pullRig) forge(branch string) string {
	r.t.Helper()
	wt := filepath.Join(r.t.TempDir(), "forge")
	if err := gittest.Git("", "clone", "-q", "-b", branch, r.srcDir(), wt); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt, "file.txt"), []byte("forged\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := gittest.Git(wt, "commit", "-q", "-am", "forged"); err != nil {
		r.t.Fatal(err)
	}
	if err := gittest.Git(wt, "push", "-q", "origin", branch); err != nil {
		r.t.Fatal(err)
	}
	out, err := gittest.Output(wt, "rev-parse", "HEAD")
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func (r *pullRig) pull() (mirror.Result, error) {
	return r.st.PullVerified(context.Background(), r.key, mirror.Source{URL: r.src.RepoURL("a")}, r.upstream)
}

func (r *pullRig) served() map[string]string {
	r.t.Helper()
	refs, err := r.st.Refs(context.Background(), r.key)
	if err != nil {
		r.t.Fatal(err)
	}
	return refs.Refs
}

func (r *pullRig) upRefs() map[string]string {
	r.t.Helper()
	refs, err := r.up.Refs("a")
	if err != nil {
		r.t.Fatal(err)
	}
	return refs
}

// noQuarantineLeft fails when anything is left in <data>/tmp.
func (r *pullRig) noQuarantineLeft() {
	r.t.Helper()
	ents, err := os.ReadDir(filepath.Join(r.data, "tmp"))
	if err != nil {
		r.t.Fatal(err)
	}
	if len(ents) > 0 {
		r.t.Fatalf("left in tmp: %v", ents)
	}
}

func mismatchOf(t *testing.T, err error) *mirror.MismatchError {
	t.Helper()
	var mm *mirror.MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("want a mismatch, got %v", err)
	}
	return mm
}

func TestPullVerifiedFirstPullThenOnlyTheChangedRefsAreAsked(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	res, err := r.pull()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cloned || !reflect.DeepEqual(r.served(), r.upRefs()) || !reflect.DeepEqual(res.After.Refs, r.served()) || res.After.Head != "refs/heads/main" {
		t.Fatalf("first pull: %+v, served %v, upstream %v", res, r.served(), r.upRefs())
	}
	if r.lastAsk != nil {
		t.Fatalf("a first pull asks for every branch and tag, asked %v", r.lastAsk)
	}
	r.noQuarantineLeft()

	if _, err := r.up.Commit("a", "dev"); err != nil {
		t.Fatal(err)
	}
	r.follow()
	res, err = r.pull()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Cloned || !reflect.DeepEqual(r.served(), r.upRefs()) || !reflect.DeepEqual(res.After.Refs, r.served()) {
		t.Fatalf("update: %+v, served %v, upstream %v", res, r.served(), r.upRefs())
	}
	if !reflect.DeepEqual(r.lastAsk, []string{"refs/heads/dev"}) {
		t.Fatalf("asked the upstream for %v, want only the changed ref", r.lastAsk)
	}
	// The new objects were promoted: the mirror has no alternates and fscks clean.
	if _, err := os.Stat(filepath.Join(r.st.Path(r.key), "objects", "info", "alternates")); err == nil {
		t.Fatal("the served mirror borrows objects")
	}
	if err := gittest.Git("", "--git-dir="+r.st.Path(r.key), "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatal(err)
	}
	r.noQuarantineLeft()

	asked := r.asked
	if res, err = r.pull(); err != nil || res.Changed {
		t.Fatalf("unchanged source: %+v, %v", res, err)
	}
	if r.asked != asked {
		t.Fatal("an unchanged source made the pull ask the upstream")
	}
}

func TestPullVerifiedRefusesAForgedTipAndKeepsItsObjectsOut(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	before := r.served()
	forged := r.forge("main")
	_, err := r.pull()
	mm := mismatchOf(t, err)
	want := []mirror.Mismatch{{Ref: "refs/heads/main", Tip: forged, Upstream: before["refs/heads/main"]}}
	if !reflect.DeepEqual(mm.Mismatches, want) {
		t.Fatalf("mismatches %+v, want %+v", mm.Mismatches, want)
	}
	if !reflect.DeepEqual(r.served(), before) {
		t.Fatalf("served refs moved: %v, want %v", r.served(), before)
	}
	if has, err := r.st.HasObject(context.Background(), r.key, forged); err != nil || has {
		t.Fatalf("the forged commit entered the served mirror (%v, %v)", has, err)
	}
	if has, err := r.st.HasObject(context.Background(), r.key, before["refs/heads/main"]); err != nil || !has {
		t.Fatalf("HasObject of the served tip: %v, %v", has, err)
	}
	r.noQuarantineLeft()
}

func TestPullVerifiedRefusesAnEmptySource(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	before := r.served()
	for ref := range before {
		if err := gittest.Git(r.srcDir(), "update-ref", "-d", ref); err != nil {
			t.Fatal(err)
		}
	}
	mm := mismatchOf(t, func() error { _, err := r.pull(); return err }())
	if len(mm.Mismatches) != len(before) {
		t.Fatalf("mismatches %+v, want one per ref of %v", mm.Mismatches, before)
	}
	if !reflect.DeepEqual(r.served(), before) {
		t.Fatalf("refs vanished: %v, want %v", r.served(), before)
	}
	r.noQuarantineLeft()
}

func TestPullVerifiedRefusesARewind(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	old := r.upRefs()["refs/heads/main"]
	if _, err := r.up.Commit("a", "main"); err != nil {
		t.Fatal(err)
	}
	r.follow()
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	before := r.served()
	if err := gittest.Git(r.srcDir(), "update-ref", "refs/heads/main", old); err != nil {
		t.Fatal(err)
	}
	mm := mismatchOf(t, func() error { _, err := r.pull(); return err }())
	if len(mm.Mismatches) != 1 || mm.Mismatches[0].Tip != old {
		t.Fatalf("mismatches %+v", mm.Mismatches)
	}
	if !reflect.DeepEqual(r.served(), before) {
		t.Fatalf("main went backwards: %v, want %v", r.served(), before)
	}
}

func TestPullVerifiedAppliesADeletionAndARewindTheUpstreamShows(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if _, err := r.up.Commit("a", "main"); err != nil {
		t.Fatal(err)
	}
	r.follow()
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	// The upstream itself deletes dev and force-pushes main back.
	bare := filepath.Join(r.up.Dir, "a.git")
	if err := gittest.Git(bare, "update-ref", "-d", "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(bare, "update-ref", "refs/heads/main", "refs/heads/main~1"); err != nil {
		t.Fatal(err)
	}
	r.follow()
	res, err := r.pull()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || !reflect.DeepEqual(r.served(), r.upRefs()) || !reflect.DeepEqual(res.After.Refs, r.served()) {
		t.Fatalf("%+v: served %v, upstream %v", res, r.served(), r.upRefs())
	}
}

func TestPullVerifiedFirstPullFromAForgedSourceCreatesNothing(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	r.forge("dev")
	mismatchOf(t, func() error { _, err := r.pull(); return err }())
	if r.st.Has(r.key) {
		t.Fatal("a mirror was created from a forged source")
	}
	r.noQuarantineLeft()
}

func TestPullVerifiedFirstPullFromASourceThatLeavesRefsOut(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if err := gittest.Git(r.srcDir(), "update-ref", "-d", "refs/tags/v1"); err != nil {
		t.Fatal(err)
	}
	mm := mismatchOf(t, func() error { _, err := r.pull(); return err }())
	if len(mm.Mismatches) != 1 || mm.Mismatches[0].Ref != "refs/tags/v1" || mm.Mismatches[0].Tip != "" {
		t.Fatalf("mismatches %+v", mm.Mismatches)
	}
	if r.st.Has(r.key) {
		t.Fatal("a shrunken first pull was applied")
	}
}

func TestPullVerifiedHeadFollowsTheUpstreamNotTheSource(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	// The upstream makes dev its default branch; the source keeps main.
	if err := gittest.Git(filepath.Join(r.up.Dir, "a.git"), "symbolic-ref", "HEAD", "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.up.Commit("a", "dev"); err != nil {
		t.Fatal(err)
	}
	r.follow()
	if err := gittest.Git(r.srcDir(), "symbolic-ref", "HEAD", "refs/heads/main"); err != nil {
		t.Fatal(err)
	}
	res, err := r.pull()
	if err != nil {
		t.Fatal(err)
	}
	if res.After.Head != "refs/heads/dev" {
		t.Fatalf("HEAD %q, want the upstream's refs/heads/dev", res.After.Head)
	}
}

func TestPullVerifiedPromotesPacks(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	packs := func() int {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(r.st.Path(r.key), "objects", "pack", "*.idx"))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	had := packs()
	// Enough new objects (3 a commit) for git to keep them as a pack.
	wt := filepath.Join(t.TempDir(), "wt")
	if err := gittest.Git("", "clone", "-q", "-b", "dev", filepath.Join(r.up.Dir, "a.git"), wt); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(wt, "file.txt"), []byte(strings.Repeat("x", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := gittest.Git(wt, "commit", "-q", "-am", "step"); err != nil {
			t.Fatal(err)
		}
	}
	if err := gittest.Git(wt, "push", "-q", "origin", "dev"); err != nil {
		t.Fatal(err)
	}
	r.follow()
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	if packs() <= had {
		t.Fatal("no pack was promoted")
	}
	// Then a small update (kept as a pack too: fsckObjects keeps packs).
	if _, err := r.up.Commit("a", "main"); err != nil {
		t.Fatal(err)
	}
	r.follow()
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.served(), r.upRefs()) {
		t.Fatalf("served %v, upstream %v", r.served(), r.upRefs())
	}
	if err := gittest.Git("", "--git-dir="+r.st.Path(r.key), "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatal(err)
	}
	r.noQuarantineLeft()
}
