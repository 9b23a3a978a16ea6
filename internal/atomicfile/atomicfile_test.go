package atomicfile_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
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

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no inode numbers here")
	}
	return sys.Ino
}

// The new content is a new file renamed over the old one, never the old
// file rewritten: a crash mid-write leaves the old file as it was.
func TestWriteInReplacesTheFileByRename(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := os.MkdirAll(filepath.Join(dir, "objects", "info"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join("objects", "info", "alternates")
	if err := atomicfile.WriteIn(root, name, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := inode(t, filepath.Join(dir, name))
	if err := atomicfile.WriteIn(root, name, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after := inode(t, filepath.Join(dir, name)); after == before {
		t.Fatalf("the file was rewritten in place (inode %d kept)", before)
	}
	if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "new\n" {
		t.Fatalf("read %q, %v; want new", b, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "objects", "info")); len(ents) != 1 {
		t.Fatalf("the directory holds %d entries, want the file alone: %v", len(ents), ents)
	}
}

// A reader of the file while it is rewritten finds the old content or the
// new one, whole, at every read.
func TestAReaderFindsTheOldOrTheNewContentNeverAPart(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	const size = 256 << 10
	contents := [][]byte{bytes.Repeat([]byte("a"), size), bytes.Repeat([]byte("b"), size)}
	if err := atomicfile.WriteIn(root, "marker", contents[0], 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	bad := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(filepath.Join(dir, "marker"))
			if err != nil || !bytes.Equal(b, contents[0]) && !bytes.Equal(b, contents[1]) {
				select {
				case bad <- fmt.Sprintf("read %d bytes (%v)", len(b), err):
				default:
				}
				return
			}
		}
	})
	for i := range 40 {
		if err := atomicfile.WriteIn(root, "marker", contents[(i+1)%2], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case msg := <-bad:
		t.Fatalf("a reader found neither content: %s", msg)
	default:
	}
}

// A symlink planted where the file goes is replaced, not written through,
// and one planted as a directory on the way leads nothing out of the root.
func TestWriteInDoesNotLeaveTheRoot(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "target")
	if err := os.Symlink(target, filepath.Join(dir, "marker")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := atomicfile.WriteIn(root, "marker", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteIn(root, filepath.Join("sub", "f"), []byte("x"), 0o644); err == nil {
		t.Error("a write through a symlinked directory succeeded")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside the root: %v", ents)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "marker")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the planted link is still there (%v, %v)", fi, err)
	}
}
