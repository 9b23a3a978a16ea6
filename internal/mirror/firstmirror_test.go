package mirror_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// A first mirror asks the upstream as often as `git clone --mirror` does,
// plus one: a ref listing (advertisement and ls-refs) and a fetch of what
// it listed (advertisement and fetch), where a clone lists and fetches in
// one process.
func TestAFirstMirrorMakesFourRequestsAsACloneMakesThree(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main", "dev"}, []string{"v1", "v2"}); err != nil {
		t.Fatal(err)
	}
	url := up.RepoURL("a")
	res, err := st.Sync(context.Background(), keyOf(t, url), url)
	if err != nil {
		t.Fatal(err)
	}
	mirrored := up.Requests("a")
	if err := gittest.Git("", "clone", "-q", "--mirror", url, filepath.Join(t.TempDir(), "clone.git")); err != nil {
		t.Fatal(err)
	}
	cloned := up.Requests("a") - mirrored
	if mirrored != 4 || cloned != 3 {
		t.Fatalf("a first mirror made %d requests, a clone --mirror %d; want 4 and 3", mirrored, cloned)
	}
	want, _ := up.Refs("a")
	if !res.Cloned || !reflect.DeepEqual(res.After.Refs, want) || res.After.Head != "refs/heads/main" {
		t.Fatalf("first mirror: %+v, want a clone of %v with HEAD refs/heads/main", res, want)
	}
}

// A first mirror is served at once as maintenance leaves a mirror: its
// one pack under a bitmap, a commit graph, its refs packed, and the run
// recorded as a full one (the pack holds only what the refs reach), so
// that maintenance has nothing to do for it.
func TestAFirstMirrorHasItsBitmapAndCommitGraphAtOnce(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := up.Commit("a", "dev"); err != nil {
			t.Fatal(err)
		}
	}
	url := up.RepoURL("a")
	key := keyOf(t, url)
	before := time.Now().Truncate(time.Second)
	if _, err := st.Sync(context.Background(), key, url); err != nil {
		t.Fatal(err)
	}
	sh, err := st.Probe(key)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Packs != 1 || sh.NewPacks != 0 || sh.Loose != 0 || !sh.Bitmap || !sh.CommitGraph || sh.LastFull.Before(before) {
		t.Fatalf("a first mirror: %+v; want one pack under a bitmap, a commit graph, a full run recorded", sh)
	}
	if n := mirror.NeedOf(sh, time.Now(), 7*24*time.Hour); n.Due() {
		t.Fatalf("need of a first mirror = %+v, want none", n)
	}
	dir := st.Path(key)
	if loose, _ := filepath.Glob(filepath.Join(dir, "refs", "heads", "*")); len(loose) != 0 {
		t.Fatalf("loose refs in a first mirror: %v, want them packed", loose)
	}
	if err := gittest.Git("", "--git-dir="+dir, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir="+dir, "commit-graph", "verify"); err != nil {
		t.Fatal(err)
	}
}

// A first mirror checks what a plain clone checks: an upstream whose pack
// leaves out an object its refs need is refused and no mirror is put in
// place, whether the object is one that another object in the pack names
// (index-pack --strict finds it missing) or a branch's tip that nothing
// else names (only the fetch's connectivity check, which the refs written
// before it cut short, finds that).
func TestAFirstMirrorRefusesAPackThatLeavesOutAnObject(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	tip, err := up.Commit("a", "dev")
	if err != nil {
		t.Fatal(err)
	}
	blob, err := gittest.Output("", "--git-dir="+filepath.Join(up.Dir, "a.git"), "rev-parse", "refs/heads/main:file.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ what, omit string }{
		{"a blob that main's tree names", strings.TrimSpace(blob)},
		{"the tip of dev, named by no other object", tip},
	} {
		t.Run(tc.what, func(t *testing.T) {
			srv, err := up.StartOmitting(tc.omit)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			url := srv.RepoURL("a")
			key := keyOf(t, url)
			_, err = st.Sync(context.Background(), key, url)
			if err == nil || !strings.Contains(err.Error(), tc.omit) {
				t.Fatalf("a first mirror of a pack without %s (%s): err = %v; want it refused for that object", tc.what, tc.omit, err)
			}
			if st.Has(key) {
				t.Fatalf("a mirror is in place after a pack without %s", tc.what)
			}
		})
	}
}
