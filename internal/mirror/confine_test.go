package mirror_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// plantLink replaces the directory that holds path with a symlink to a
// fresh directory outside the data directory, and returns that directory.
func plantLink(t *testing.T, path string) string {
	t.Helper()
	outside := t.TempDir()
	parent := filepath.Dir(path)
	if err := os.RemoveAll(parent); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(parent), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, parent); err != nil {
		t.Fatal(err)
	}
	return outside
}

func TestASymlinkPlantedInTheDataDirectoryIsNotWrittenThrough(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("a")
	key := keyOf(t, url)
	// The key's parent directory now leads outside the data directory.
	outside := plantLink(t, st.Path(key))

	if _, err := st.Sync(ctx, key, url); err == nil {
		t.Error("Sync cloned through a symlink that leaves the data directory")
	}
	if got := entries(t, outside); len(got) != 0 {
		t.Fatalf("Sync wrote outside the data directory: %v", got)
	}
	if st.Has(key) {
		t.Error("Has answers true for a path outside the data directory")
	}

	// What lies outside under the key's name is not the store's to touch.
	victim := filepath.Join(outside, filepath.Base(st.Path(key)))
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sync(ctx, key, url); err == nil {
		t.Error("Sync fetched into a directory outside the data directory")
	}
	if err := st.Remove(context.Background(), key); err == nil {
		t.Error("Remove moved a directory from outside the data directory")
	}
	if err := st.Retire(context.Background(), key); err == nil {
		t.Error("Retire moved a directory from outside the data directory")
	}
	if _, err := st.Maintain(ctx, key, 0); err == nil {
		t.Error("Maintain ran on a directory outside the data directory")
	}
	if err := st.Prune(ctx, key); err == nil {
		t.Error("Prune looked at a directory outside the data directory")
	}
	if got := entries(t, victim); len(got) != 1 || got[0] != "precious" {
		t.Fatalf("the directory outside now holds %v, want only its own file", got)
	}
}

func TestARetiredAreaThatLeadsOutsideIsRefused(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	data := filepath.Dir(st.Root())
	ctx := context.Background()
	url := up.RepoURL("a")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(data, "removed")); err != nil {
		t.Fatal(err)
	}
	if err := st.Retire(context.Background(), key); err == nil {
		t.Error("Retire moved a mirror through a symlink out of the data directory")
	}
	if got := entries(t, outside); len(got) != 0 {
		t.Errorf("Retire wrote outside the data directory: %v", got)
	}
	if !st.Has(key) {
		t.Error("the mirror is no longer served after a refused retirement")
	}
}

func TestAStoreWhoseReposDirectoryLeadsOutsideDoesNotOpen(t *testing.T) {
	t.Parallel()
	data, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(data, "repos")); err != nil {
		t.Fatal(err)
	}
	st, err := mirror.Open(data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.DiscardHandler))
	if err == nil {
		st.Close()
		t.Fatal("a store opened on repos/ that leads outside the data directory")
	}
	if got := entries(t, outside); len(got) != 0 {
		t.Errorf("Open wrote outside the data directory: %v", got)
	}
}
