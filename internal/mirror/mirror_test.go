package mirror_test

import (
	"context"
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

func setup(t *testing.T, opts ...mirror.Option) (*gittest.Upstreams, *mirror.Store) {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	st, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return up, st
}

func keyOf(t testing.TB, url string) repokey.Key {
	t.Helper()
	k, _, err := repokey.Normalize(url, repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	return repokey.Key(k)
}

func TestSyncClonesThenFetchesOnlyWhenRefsDiffer(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main", "dev"}, []string{"v1", "v2"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("a")
	key := keyOf(t, url)

	res, err := st.Sync(ctx, key, url)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cloned || !res.Changed {
		t.Fatalf("first sync: want a clone, got %+v", res)
	}
	want, _ := up.Refs("a")
	if !reflect.DeepEqual(res.After.Refs, want) {
		t.Fatalf("refs after clone = %v, want %v", res.After.Refs, want)
	}
	if res.After.Head != "refs/heads/main" {
		t.Fatalf("HEAD = %q", res.After.Head)
	}

	res, err = st.Sync(ctx, key, url)
	if err != nil {
		t.Fatal(err)
	}
	if res.Fetched || res.Changed {
		t.Fatalf("unchanged upstream: want no fetch, got %+v", res)
	}

	if _, err := up.Commit("a", "dev"); err != nil {
		t.Fatal(err)
	}
	res, err = st.Sync(ctx, key, url)
	if err != nil {
		t.Fatal(err)
	}
	want, _ = up.Refs("a")
	if !res.Fetched || !res.Changed || !reflect.DeepEqual(res.After.Refs, want) {
		t.Fatalf("after a push: got %+v, want refs %v", res, want)
	}
}

func TestSyncOfMissingUpstreamFailsAsNotFoundAndLeavesNothing(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	url := up.RepoURL("nope")
	key := keyOf(t, url)
	_, err := st.Sync(context.Background(), key, url)
	if err == nil {
		t.Fatal("want an error")
	}
	if c := gitcmd.ClassOf(err); c != gitcmd.ClassDeleted { // HTTP 404
		t.Fatalf("class = %s (%v), want deleted", c, err)
	}
	if st.Has(key) {
		t.Fatal("a failed clone left a repository behind")
	}
}

func TestScanFindsMirrorsAndCleansStaleLocks(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("x/y", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	url := up.RepoURL("x/y")
	key := keyOf(t, url)
	if _, err := st.Sync(context.Background(), key, url); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(st.Path(key), "refs", "heads", "main.lock")
	if err := os.WriteFile(lock, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := st.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keys, []repokey.Key{key}) {
		t.Fatalf("scan = %v, want [%s]", keys, key)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatal("stale lock survived the scan")
	}
	if err := st.Remove(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if st.Has(key) {
		t.Fatal("removed mirror still there")
	}
	keys, _ = st.Scan()
	if len(keys) != 0 {
		t.Fatalf("scan after remove = %v", keys)
	}
}

func TestScanMovesAMirrorStoredUnderAnOlderLayoutToItsDirectory(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("X/Y", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	url := up.RepoURL("X/Y")
	key := keyOf(t, url)
	if !strings.HasSuffix(string(key), "/X/Y") {
		t.Fatalf("key %s: the case of a host that does not fold it is not kept", key)
	}
	if _, err := st.Sync(context.Background(), key, url); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(filepath.ToSlash(st.Path(key)), "/!x/!y.git") {
		t.Fatalf("mirror of %s at %s: upper case is not escaped", key, st.Path(key))
	}
	// What an older gitfleet, which wrote upper case as it is, left on disk.
	oldDir := filepath.Join(st.Root(), filepath.FromSlash(string(key))+".git")
	if err := os.MkdirAll(filepath.Dir(oldDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(st.Path(key), oldDir); err != nil {
		t.Fatal(err)
	}
	keys, err := st.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keys, []repokey.Key{key}) {
		t.Fatalf("scan = %v, want [%s]", keys, key)
	}
	if !st.Has(key) {
		t.Fatal("the mirror is not at its directory")
	}
	if _, err := os.Stat(filepath.Dir(oldDir)); !os.IsNotExist(err) {
		t.Fatalf("the older layout's directory is still there: %v", err)
	}
	if refs, err := st.Refs(context.Background(), key); err != nil || len(refs.Refs) != 1 {
		t.Fatalf("refs of the moved mirror = %v, %v", refs.Refs, err)
	}
}
