package mirror

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

func TestPromoteObjectsMovesLooseObjectsAndPacksAndKeepsWhatIsThere(t *testing.T) {
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
	if err := promoteObjects(filepath.Join(q, "objects"), filepath.Join(served, "objects")); err != nil {
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
