package mirror_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/mirror"
)

// alternates reads the alternates file of the repository at dir.
func alternates(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "objects", "info", "alternates"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// linkedRelative fails the test unless key's mirror borrows network's pool
// through a relative link that names the pool from where the mirror is.
func linkedRelative(t *testing.T, st *mirror.Store, key, network, when string) {
	t.Helper()
	got := alternates(t, st.Path(key))
	want, err := filepath.Rel(filepath.Join(st.Path(key), "objects"), filepath.Join(st.PoolPath(network), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.IsAbs(got) || got != want {
		t.Fatalf("%s: %s's alternates is %q, want %q (relative to its objects directory)", when, key, got, want)
	}
}

// TestAMembersLinkIsRelativeWhereverItIsWritten: a clone, a first pull
// from an owner, a standalone mirror's joining, and a leave that failed
// (the link put back) all link the member to its pool relative to its own
// objects directory.
func TestAMembersLinkIsRelativeWhereverItIsWritten(t *testing.T) {
	up, st := setup(t)
	forks := network(t, up, 4)
	ctx := context.Background()
	keys := make([]string, len(forks))
	for i, f := range forks {
		keys[i] = keyOf(t, up.RepoURL(f))
	}

	if _, err := st.SyncIn(ctx, keys[0], up.RepoURL(forks[0]), "base"); err != nil {
		t.Fatal(err)
	}
	linkedRelative(t, st, keys[0], "base", "after a clone")

	if _, err := st.PullVerifiedIn(ctx, keys[1], "base", mirror.Source{URL: up.RepoURL(forks[1])}, upstreamOf(up, forks[1])); err != nil {
		t.Fatal(err)
	}
	linkedRelative(t, st, keys[1], "base", "after a first pull")

	if _, err := st.Sync(ctx, keys[2], up.RepoURL(forks[2])); err != nil {
		t.Fatal(err)
	}
	if err := st.JoinNetwork(ctx, keys[2], "base"); err != nil {
		t.Fatal(err)
	}
	linkedRelative(t, st, keys[2], "base", "after a join")

	// The pack the leaving member's repack wrote is lost (as a disk loses
	// it) once its link is cut: it is not whole without the pool, and the
	// leave puts the link back (the pool still holds its objects).
	if _, err := st.SyncIn(ctx, keys[3], up.RepoURL(forks[3]), "base"); err != nil {
		t.Fatal(err)
	}
	mirror.SetHookCut(st, func(key string) {
		packs, err := filepath.Glob(filepath.Join(st.Path(key), "objects", "pack", "pack-*"))
		if err != nil || len(packs) == 0 {
			t.Errorf("the leaving member's repack: packs %v, %v", packs, err)
		}
		for _, p := range packs {
			if err := os.Remove(p); err != nil {
				t.Error(err)
			}
		}
	})
	if err := st.LeaveNetwork(ctx, keys[3]); !errors.Is(err, mirror.ErrCorrupt) {
		t.Fatalf("a leave whose member is not whole without the pool: %v, want ErrCorrupt", err)
	}
	if st.Network(keys[3]) != "base" {
		t.Fatalf("after a failed leave, %s is in network %q, want base", keys[3], st.Network(keys[3]))
	}
	linkedRelative(t, st, keys[3], "base", "after a failed leave")
	for _, k := range keys {
		fsck(t, st.Path(k))
	}
}
