// Package atomicfile writes a small file so that a reader, or the next start
// after a crash or a power loss, finds either its old content or its new
// one, never a part: the bytes go to a new file beside it, are synced, and
// the new file is renamed over the old (and the directory synced). WriteIn
// does the same inside an os.Root, so that a symlink planted on the way
// cannot lead the new file, or the rename, out of it.
package atomicfile

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces the file at path with data, readable as perm says.
func Write(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer root.Close()
	if err := writeIn(root, base, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteIn replaces the file name (relative to root) with data, readable as
// perm says. Every step goes through root.
func WriteIn(root *os.Root, name string, data []byte, perm os.FileMode) error {
	if err := writeIn(root, name, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func writeIn(root *os.Root, name string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	// O_EXCL: a name already there (planted, or a leftover) is not reused.
	tmp := filepath.Join(dir, "."+base+"."+rand.Text()+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	// The file was made 0600 (less the umask); perm is asked for explicitly.
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = root.Rename(tmp, name); err != nil {
		return err
	}
	// The rename is durable once the directory is; a directory that cannot
	// be synced (some file systems refuse) leaves the rename as the OS keeps it.
	if d, derr := root.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
