package atomicfile_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/atomicfile"
)

func TestWriteReplacesAndLeavesNothingBeside(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "node.json")
	if err := atomicfile.Write(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new" {
		t.Fatalf("read %q, %v; want new", b, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("the directory holds %d entries, want the file alone: %v", len(ents), ents)
	}
}

func TestWriteGivesThePermissionAskedFor(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	dir := t.TempDir()
	for _, perm := range []os.FileMode{0o600, 0o644} {
		p := filepath.Join(dir, perm.String())
		if err := atomicfile.Write(p, []byte("x"), perm); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != perm {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), perm)
		}
	}
}

func TestAFailedWriteKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "secret")
	if err := atomicfile.Write(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the rename: the write fails, the old file
	// stays, and no temporary file is left behind.
	if err := atomicfile.Write(dir, []byte("new"), 0o600); err == nil {
		t.Fatal("writing over a directory succeeded")
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "old" {
		t.Fatalf("read %q, %v; want old", b, err)
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("a failed write left %s behind", e.Name())
		}
	}
}
