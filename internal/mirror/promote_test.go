package mirror

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

func TestPromoteObjectsMovesLooseObjectsAndPacksAndKeepsWhatIsThere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	served, q := filepath.Join(dir, "served.git"), filepath.Join(dir, "q.git")
	for _, d := range []string{served, q} {
		if err := gittest.Git("", "init", "-q", "--bare", d); err != nil {
			t.Fatal(err)
		}
	}
	blob := func(repo, content string) string {
		t.Helper()
		f := filepath.Join(dir, "content")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := gittest.Output("", "--git-dir="+repo, "hash-object", "-w", f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	loose := blob(q, "new in the quarantine\n")
	both := blob(q, "in both\n")
	if blob(served, "in both\n") != both {
		t.Fatal("hash-object is not content-addressed")
	}
	packed := blob(q, "to be packed\n")
	// Pack the objects so far in the quarantine, as a fetch leaves them
	// (repack packs what a ref reaches).
	for _, args := range [][]string{{"update-ref", "refs/tags/p", packed}, {"repack", "-q", "-a", "-d"}, {"update-ref", "-d", "refs/tags/p"}} {
		if err := gittest.Git("", append([]string{"--git-dir=" + q}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	loose2 := blob(q, "loose after the repack\n")
	data, err := openDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer data.root.Close()
	if err := data.promoteObjects(filepath.Join(q, "objects"), filepath.Join(served, "objects")); err != nil {
		t.Fatal(err)
	}
	for _, oid := range []string{loose, both, packed, loose2} {
		if err := gittest.Git("", "--git-dir="+served, "cat-file", "-e", oid); err != nil {
			t.Fatalf("%s not in the served repository: %v", oid, err)
		}
	}
	if idx, _ := filepath.Glob(filepath.Join(served, "objects", "pack", "*.idx")); len(idx) != 1 {
		t.Fatalf("packs in the served repository: %v", idx)
	}
	if err := gittest.Git("", "--git-dir="+served, "fsck", "--strict"); err != nil {
		t.Fatal(err)
	}
}

// A symlink planted in a mirror's objects directory does not lead the
// quarantine's objects out of the data directory: promoting refuses it.
func TestPromoteObjectsDoesNotMoveThroughASymlinkOutOfTheDataDirectory(t *testing.T) {
	t.Parallel()
	data, outside := t.TempDir(), t.TempDir()
	served, q := filepath.Join(data, "repos", "x.git"), filepath.Join(data, "tmp", "q.git")
	for _, d := range []string{served, q} {
		if err := gittest.Git("", "init", "-q", "--bare", d); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(data, "content")
	if err := os.WriteFile(f, []byte("a loose object\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := gittest.Output("", "--git-dir="+q, "hash-object", "-w", f)
	if err != nil {
		t.Fatal(err)
	}
	oid := strings.TrimSpace(out)
	if err := os.Symlink(outside, filepath.Join(served, "objects", oid[:2])); err != nil {
		t.Fatal(err)
	}
	d, err := openDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer d.root.Close()
	if err := d.promoteObjects(filepath.Join(q, "objects"), filepath.Join(served, "objects")); err == nil {
		t.Error("promoting through a symlink that leaves the data directory succeeded")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("an object was moved outside the data directory: %v", ents)
	}
}
