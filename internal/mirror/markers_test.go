package mirror_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/mirror"
)

// inodeOf is the inode number of the file at p.
func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no inode numbers here")
	}
	return st.Ino
}

// git reads a member's alternates whenever it opens the member: a link
// rewritten in place would be empty, for a moment, to a reader (which would
// then miss most objects), and empty or half written after a crash. The
// store writes the new link beside the old and renames it over.
func TestALinkRewrittenByTheStoreReplacesTheAlternatesFileWhole(t *testing.T) {
	t.Parallel()
	up, _ := setup(t)
	forks := network(t, up, 1)
	data := t.TempDir()
	st := openAt(t, data)
	key := syncForks(t, st, up, forks, "base")[0]
	alt := filepath.Join(st.Path(key), "objects", "info", "alternates")
	// As an earlier version wrote it: absolute, for the scan to heal.
	abs := filepath.Join(st.PoolPath("base"), "objects")
	if err := os.WriteFile(alt, []byte(abs+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := inodeOf(t, alt)

	st = openAt(t, data)
	if _, err := st.Scan(); err != nil {
		t.Fatal(err)
	}
	linkedRelative(t, st, key, "base", "healed")
	if inodeOf(t, alt) == before {
		t.Fatal("the alternates file was rewritten in place, not replaced")
	}
	fsck(t, st.Path(key))
}

// The tombstone marker is written inside the data directory, whole: one
// planted as a symlink to a file outside is replaced, not written through.
func TestATombstoneMarkerPlantedAsASymlinkIsNotWrittenThrough(t *testing.T) {
	t.Parallel()
	r := newEmptyRig(t)
	r.st.SetTombstonePeriod(7 * 24 * time.Hour)
	target := filepath.Join(t.TempDir(), "target")
	marker := filepath.Join(r.st.Path(r.key), "gitfleet-tombstone")
	if err := os.Symlink(target, marker); err != nil {
		t.Fatal(err)
	}
	r.empty()
	if _, err := r.trySync(); !errors.Is(err, mirror.ErrEmptyAdvertisement) {
		t.Fatal(err)
	}
	r.clk.Advance(mirror.DefaultEmptyConfirmAfter)
	if _, err := r.trySync(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the marker was written through the symlink, outside the data directory (%v)", err)
	}
	fi, err := os.Lstat(marker)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the tombstone marker is not a file of the mirror's: %v, %v", fi, err)
	}
	b, err := os.ReadFile(marker)
	if _, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil || perr != nil {
		t.Fatalf("tombstone marker %q (%v), want Unix seconds", b, err)
	}
}

// A write cut short by a crash leaves the new file beside the old one, not
// yet renamed: the store removes it when it opens, and keeps the marker.
func TestAMarkerWriteCutShortIsClearedAtTheNextStart(t *testing.T) {
	t.Parallel()
	r := newPruneRig(t, []string{"main"}, time.Minute, mirror.Limits{})
	ctx := context.Background()
	if _, err := r.st.Maintain(ctx, r.key, 0); err != nil {
		t.Fatal(err)
	}
	dir := r.st.Path(r.key)
	marker := filepath.Join(dir, "gitfleet-maintained")
	old, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	cut := []string{filepath.Join(dir, ".gitfleet-maintained.CUT.tmp"), filepath.Join(dir, "objects", "info", ".alternates.CUT.tmp")}
	for _, p := range cut {
		if err := os.WriteFile(p, []byte("12"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.open(time.Minute, mirror.Limits{})
	for _, p := range cut {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after a start (%v)", filepath.Base(p), err)
		}
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != string(old) {
		t.Fatalf("the marker after a start: %q, %v; want %q", b, err, old)
	}
}
