package mirror_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// archiveRig is an upstream "r" with branches main, dev and feature, and
// a store on a fake clock that mirrors it with the archive policy p.
type archiveRig struct {
	t    *testing.T
	up   *gittest.Upstreams
	st   *mirror.Store
	clk  *clock.Fake
	key  repokey.Key
	bare string
	n    int // force-pushes so far
}

func newArchiveRig(t *testing.T, p mirror.ArchivePolicy) *archiveRig {
	t.Helper()
	r := &archiveRig{t: t, clk: clock.NewFake(time.Unix(1765100000, 0))}
	var err error
	if r.up, err = gittest.Start(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.up.Close)
	if err := r.up.Create("r", []string{"main", "dev", "feature"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	r.bare = filepath.Join(r.up.Dir, "r.git")
	if r.st, err = mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}),
		slog.New(slog.NewTextHandler(io.Discard, nil)), mirror.WithClock(r.clk)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.st.Close() })
	r.st.SetArchive(p)
	r.key = keyOf(t, r.up.RepoURL("r"))
	r.sync()
	return r
}

func (r *archiveRig) sync() mirror.Result {
	r.t.Helper()
	res, err := r.st.Sync(context.Background(), r.key, r.up.RepoURL("r"))
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

// upstream runs git in the upstream's bare repository.
func (r *archiveRig) upstream(args ...string) {
	r.t.Helper()
	if err := gittest.Git("", append([]string{"--git-dir=" + r.bare}, args...)...); err != nil {
		r.t.Fatal(err)
	}
}

func (r *archiveRig) upRef(ref string) string { return rev(r.t, r.bare, ref) }

// forcePush adds a commit to main and then takes it away again (main back
// to its parent), as an upstream removing a leaked secret does; it
// returns the commit taken away.
func (r *archiveRig) forcePush() string {
	r.t.Helper()
	r.n++
	wt := filepath.Join(r.t.TempDir(), "wt")
	if err := gittest.Git("", "clone", "-q", "-b", "main", r.bare, wt); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt, "secret.txt"), []byte(fmt.Sprintf("secret %d\n", r.n)), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := gittest.Git(wt, "add", "secret.txt"); err != nil {
		r.t.Fatal(err)
	}
	if err := gittest.Git(wt, "commit", "-q", "-m", "a secret"); err != nil {
		r.t.Fatal(err)
	}
	if err := gittest.Git(wt, "push", "-q", "origin", "main"); err != nil {
		r.t.Fatal(err)
	}
	old := rev(r.t, filepath.Join(wt, ".git"), "HEAD")
	r.sync()
	r.upstream("update-ref", "refs/heads/main", old+"^")
	return old
}

func (r *archiveRig) archive() []mirror.ArchivedRef {
	r.t.Helper()
	refs, err := r.st.Archive(context.Background(), r.key)
	if err != nil {
		r.t.Fatal(err)
	}
	return refs
}

func rev(t *testing.T, gitDir, name string) string {
	t.Helper()
	out, err := gittest.Output("", "--git-dir="+gitDir, "rev-parse", name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// A force-push of main and the deletion of dev upstream, fetched with a
// fast-forward of feature: the old tips of main and dev are kept under
// refs/archive/<the fetch's unix time>/<ref>, feature's is not (nothing
// was taken away), the mirror's refs and digest are the upstream's alone,
// and a prune keeps the objects the archive refs reach.
func TestAForcePushAndADeletionKeepTheOldTipsUnderRefsArchive(t *testing.T) {
	t.Parallel()
	r := newArchiveRig(t, mirror.ArchivePolicy{All: true})
	oldMain := r.forcePush()
	oldDev := r.upRef("refs/heads/dev")
	r.upstream("update-ref", "-d", "refs/heads/dev")
	if _, err := r.up.Commit("r", "feature"); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(time.Minute)
	at := r.clk.Now().Unix()
	res := r.sync()

	got := map[string]string{}
	for _, a := range r.archive() {
		got[a.Name] = a.OID
		if a.At.Unix() != at || a.Name != mirror.ArchiveRefs+strconv.FormatInt(at, 10)+"/"+a.Ref {
			t.Errorf("archive ref %s: ref %s at %d, want at %d", a.Name, a.Ref, a.At.Unix(), at)
		}
	}
	want := map[string]string{
		"refs/archive/" + strconv.FormatInt(at, 10) + "/refs/heads/main": oldMain,
		"refs/archive/" + strconv.FormatInt(at, 10) + "/refs/heads/dev":  oldDev,
	}
	if len(got) != len(want) {
		t.Errorf("archive refs %v, want %v", got, want)
	}
	for name, oid := range want {
		if got[name] != oid {
			t.Errorf("%s = %q, want %s", name, got[name], oid)
		}
	}
	up, err := r.up.Refs("r")
	if err != nil {
		t.Fatal(err)
	}
	if res.After.Digest() != (gitcmd.Refs{Refs: up}).Digest() {
		t.Errorf("the mirror's digest counts its archive refs: %v, upstream %v", res.After.Refs, up)
	}
	if err := r.st.Prune(context.Background(), r.key); err != nil {
		t.Fatal(err)
	}
	for _, oid := range []string{oldMain, oldDev} {
		if err := gittest.Git("", "--git-dir="+r.st.Path(r.key), "cat-file", "-e", oid); err != nil {
			t.Errorf("%s is gone from the mirror after a prune though an archive ref keeps it", oid)
		}
	}
}

// Without the policy (the default) a force-push keeps nothing.
func TestWithoutTheArchivePolicyAForcePushKeepsNothing(t *testing.T) {
	t.Parallel()
	r := newArchiveRig(t, mirror.ArchivePolicy{})
	r.forcePush()
	r.sync()
	if refs := r.archive(); len(refs) != 0 {
		t.Fatalf("archive refs without the policy: %v", refs)
	}
}

// The policy's per-repository choice (the catalog's archive: true) keeps
// the old tips of the repositories it names only.
func TestTheArchivePolicyOfOneRepositoryKeepsItsTips(t *testing.T) {
	t.Parallel()
	var asked []repokey.Key
	r := newArchiveRig(t, mirror.ArchivePolicy{Of: func(k repokey.Key) bool { asked = append(asked, k); return true }})
	old := r.forcePush()
	r.sync()
	if refs := r.archive(); len(refs) != 1 || refs[0].OID != old || refs[0].Ref != "refs/heads/main" {
		t.Fatalf("archive refs %v, want main at %s", refs, old)
	}
	if len(asked) == 0 || asked[0] != r.key {
		t.Fatalf("the policy was asked about %v, want %s", asked, r.key)
	}
}

// An upstream that force-pushes in a loop, faster than the clock's
// second, keeps no more than MaxRefs archive refs: the newest, each
// under a name of its own (none overwrites another of the same second).
func TestAForcePushLoopKeepsAtMostMaxRefsTheNewest(t *testing.T) {
	t.Parallel()
	r := newArchiveRig(t, mirror.ArchivePolicy{All: true, MaxRefs: 3})
	var olds []string
	for range 5 {
		olds = append(olds, r.forcePush())
		r.sync()
	}
	refs := r.archive()
	if len(refs) != 3 {
		t.Fatalf("%d archive refs after 5 force-pushes with MaxRefs 3: %v", len(refs), refs)
	}
	for i, a := range refs {
		if want := olds[2+i]; a.OID != want {
			t.Errorf("archive ref %d (%s) is %s, want %s (the newest are kept)", i, a.Name, a.OID, want)
		}
	}
}

// Maintenance expires the archive refs older than the retention (on the
// store's clock) and marks the mirror, so that the next prune drops what
// they kept.
func TestMaintenanceExpiresArchiveRefsPastTheirRetention(t *testing.T) {
	t.Parallel()
	r := newArchiveRig(t, mirror.ArchivePolicy{All: true, Retention: 30 * 24 * time.Hour})
	first := r.forcePush()
	r.sync()
	r.clk.Advance(20 * 24 * time.Hour)
	second := r.forcePush()
	r.sync()
	r.clk.Advance(15 * 24 * time.Hour) // the first is 35 days old, the second 15
	if _, err := r.st.Maintain(context.Background(), r.key, time.Hour); err != nil {
		t.Fatal(err)
	}
	refs := r.archive()
	if len(refs) != 1 || refs[0].OID != second {
		t.Fatalf("archive refs after maintenance: %v, want only %s", refs, second)
	}
	if err := r.st.Prune(context.Background(), r.key); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir="+r.st.Path(r.key), "cat-file", "-e", first); err == nil {
		t.Error("the commit of the expired archive ref is still in the mirror after the prune")
	}
}

// A full node's verified pull keeps the tips it takes away itself, in its
// own transaction, and never takes an owner's refs/archive: the source
// (a volunteer) serves a forged archive ref, which the mirror does not
// get.
func TestAVerifiedPullKeepsWhatItTakesAwayAndNoArchiveOfTheSource(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	r.st.SetArchive(mirror.ArchivePolicy{All: true})
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	upBare := filepath.Join(r.up.Dir, "a.git")
	oldDev := r.upRefs()["refs/heads/dev"]
	if err := gittest.Git("", "--git-dir="+upBare, "update-ref", "-d", "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	r.follow()
	forged := r.upRefs()["refs/heads/main"]
	if err := gittest.Git("", "--git-dir="+r.srcDir(), "update-ref", "refs/archive/1/refs/heads/main", forged); err != nil {
		t.Fatal(err)
	}
	res, err := r.pull()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || res.Dropped[0].Ref != "refs/heads/dev" {
		t.Fatalf("dropped %v, want dev", res.Dropped)
	}
	refs, err := r.st.Archive(context.Background(), r.key)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].Ref != "refs/heads/dev" || refs[0].OID != oldDev {
		t.Fatalf("archive refs after the pull: %v, want dev at %s only (not the source's)", refs, oldDev)
	}
}
