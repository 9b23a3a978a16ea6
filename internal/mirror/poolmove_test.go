package mirror_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// openAt opens a store on the data directory data (closed at the test's
// end unless closed before).
func openAt(t *testing.T, data string) *mirror.Store {
	t.Helper()
	st, err := mirror.Open(data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// moveData closes st and moves its data directory whole to another parent
// (another depth too), as an operator moves it to a bigger disk; it
// returns the new place.
func moveData(t *testing.T, st *mirror.Store, data string) string {
	t.Helper()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "bigger", "disk", "gitfleet")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(data, moved); err != nil {
		t.Fatal(err)
	}
	return moved
}

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
func linkedRelative(t *testing.T, st *mirror.Store, key repokey.Key, network, when string) {
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

// packNames lists the names of the pack files of the repository at dir.
func packNames(t *testing.T, dir string) []string {
	t.Helper()
	packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range packs {
		packs[i] = filepath.Base(p)
	}
	slices.Sort(packs)
	return packs
}

// TestAMovedDataDirectoryKeepsEveryMemberWholeWithoutACopy: the data
// directory of a network's members is moved whole to another disk; a
// store opened on the new place finds every member whole (through its
// pool), pulls and serves it, and copies nothing again from an upstream.
func TestAMovedDataDirectoryKeepsEveryMemberWholeWithoutACopy(t *testing.T) {
	t.Parallel()
	up, _ := setup(t)
	forks := network(t, up, 3)
	data := t.TempDir()
	st := openAt(t, data)
	keys := syncForks(t, st, up, forks, "base")
	packs := map[string][]string{"pool": packNames(t, st.PoolPath("base"))}
	for _, k := range keys {
		packs[string(k)] = packNames(t, st.Path(k))
	}

	st = openAt(t, moveData(t, st, data))
	ctx := context.Background()
	if got, err := st.Scan(); err != nil || !reflect.DeepEqual(got, slices.Sorted(slices.Values(keys))) {
		t.Fatalf("scan of the moved data directory = %v, %v; want %v", got, err, keys)
	}
	for _, k := range keys {
		if err := st.Verify(ctx, k); err != nil {
			t.Fatalf("%s after the move: %v", k, err)
		}
		fsck(t, st.Path(k))
		if err := gittest.Git("", "--git-dir="+st.Path(k), "rev-list", "--objects", "--all", "--quiet"); err != nil {
			t.Fatalf("%s after the move: %v", k, err)
		}
		linkedRelative(t, st, k, "base", "after the move")
	}
	fsck(t, st.PoolPath("base"))

	// Served as before, through the pool.
	base, _ := fullNodeServer(t, st)
	for i, k := range keys {
		clone := filepath.Join(t.TempDir(), "clone.git")
		if err := gittest.Git("", "clone", "-q", "--mirror", base+"/"+string(k)+".git", clone); err != nil {
			t.Fatalf("clone of %s served after the move: %v", k, err)
		}
		got, err := gittest.RefsOf(clone)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := up.Refs(forks[i]); !reflect.DeepEqual(got, want) {
			t.Fatalf("clone of %s served after the move: refs %v, want %v", k, got, want)
		}
	}

	// Pulled as before: nothing when nothing changed, then only what is new.
	for i, k := range keys {
		res, err := st.SyncIn(ctx, k, up.RepoURL(forks[i]), "base")
		if err != nil || res.Cloned || res.Fetched {
			t.Fatalf("sync of %s after the move: %+v, %v; want nothing fetched", k, res, err)
		}
	}
	if got := packNames(t, st.PoolPath("base")); !reflect.DeepEqual(got, packs["pool"]) {
		t.Fatalf("the pool's packs after the move: %v, want %v", got, packs["pool"])
	}
	for _, k := range keys {
		if got := packNames(t, st.Path(k)); !reflect.DeepEqual(got, packs[string(k)]) {
			t.Fatalf("%s's packs after the move: %v, want %v (not copied again)", k, got, packs[string(k)])
		}
	}
	tip, err := up.Commit(forks[0], "main")
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.SyncIn(ctx, keys[0], up.RepoURL(forks[0]), "base")
	if err != nil || res.Cloned || !res.Changed || res.After.Refs["refs/heads/main"] != tip {
		t.Fatalf("sync of %s's new commit after the move: %+v, %v", keys[0], res, err)
	}
	fsck(t, st.Path(keys[0]))
	if !hasObject(st.PoolPath("base"), tip) {
		t.Fatal("the new commit pulled after the move is not shared with the pool")
	}
}

// TestAMemberLinkedAbsoluteByAnEarlierVersionIsHealedAfterAMove: members
// written by an earlier gitfleet name their pool by an absolute path; once
// the data directory is moved, that path is gone. The store's scan rewrites
// each link relative, and no member is copied again.
func TestAMemberLinkedAbsoluteByAnEarlierVersionIsHealedAfterAMove(t *testing.T) {
	t.Parallel()
	up, _ := setup(t)
	forks := network(t, up, 2)
	data := t.TempDir()
	st := openAt(t, data)
	keys := syncForks(t, st, up, forks, "base")
	old := filepath.Join(st.PoolPath("base"), "objects")
	packs := map[string][]string{}
	for _, k := range keys {
		// As the earlier version wrote it.
		if err := os.WriteFile(filepath.Join(st.Path(k), "objects", "info", "alternates"), []byte(old+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		packs[string(k)] = packNames(t, st.Path(k))
	}

	st = openAt(t, moveData(t, st, data))
	for _, k := range keys {
		if got := alternates(t, st.Path(k)); got != old {
			t.Fatalf("%s's alternates before the store's first use: %q, want the earlier version's %q", k, got, old)
		}
	}
	if _, err := st.Scan(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, k := range keys {
		linkedRelative(t, st, k, "base", "healed")
		if err := st.Verify(ctx, k); err != nil {
			t.Fatalf("%s after the move: %v", k, err)
		}
		fsck(t, st.Path(k))
		res, err := st.SyncIn(ctx, k, up.RepoURL(forks[i]), "base")
		if err != nil || res.Cloned || res.Fetched {
			t.Fatalf("sync of %s after the move: %+v, %v; want nothing fetched", k, res, err)
		}
		if got := packNames(t, st.Path(k)); !reflect.DeepEqual(got, packs[string(k)]) {
			t.Fatalf("%s's packs after the move: %v, want %v (not copied again)", k, got, packs[string(k)])
		}
	}
}

// TestAMembersLinkIsRelativeWhereverItIsWritten: a clone, a first pull
// from an owner, a standalone mirror's joining, and a leave that failed
// (the link put back) all link the member to its pool relative to its own
// objects directory.
func TestAMembersLinkIsRelativeWhereverItIsWritten(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 4)
	ctx := context.Background()
	keys := make([]repokey.Key, len(forks))
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
	mirror.SetHookCut(st, func(key repokey.Key) {
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
