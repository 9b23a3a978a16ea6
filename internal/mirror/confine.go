package mirror

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/atomicfile"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// dataDir does the store's own file operations on the paths it derives
// from keys (mirrors, pools, the retired area, markers, quarantines moved
// into place, what a failed fetch left) through an os.Root opened on the
// data directory, and writes every file whole (WriteFile). A symlink planted
// inside the data directory (a key's parent replaced by a link to /etc, say)
// then makes the operation fail instead of creating, renaming or deleting
// anything outside it. Paths are given absolute, as the store computes
// them; one that does not lie under the data directory is refused.
//
// git processes are given paths and cannot use the root: the store checks a
// mirror's path through it (exists) before it hands the path to git.
type dataDir struct {
	dir  string // absolute
	root *os.Root
}

func openDataDir(dir string) (dataDir, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return dataDir{}, fmt.Errorf("mirror: open the data directory: %w", err)
	}
	return dataDir{dir: dir, root: root}, nil
}

// rel is p relative to the data directory.
func (d dataDir) rel(p string) (string, error) {
	r, err := filepath.Rel(d.dir, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", &fs.PathError{Op: "resolve", Path: p, Err: errOutsideData}
	}
	return r, nil
}

// errOutsideData: a path given to dataDir is not under the data directory.
var errOutsideData = errors.New("not under the data directory")

func (d dataDir) MkdirAll(p string) error {
	r, err := d.rel(p)
	if err != nil {
		return err
	}
	return d.root.MkdirAll(r, 0o755)
}

func (d dataDir) Rename(from, to string) error {
	rf, err := d.rel(from)
	if err != nil {
		return err
	}
	rt, err := d.rel(to)
	if err != nil {
		return err
	}
	return d.root.Rename(rf, rt)
}

func (d dataDir) Remove(p string) error {
	r, err := d.rel(p)
	if err != nil {
		return err
	}
	return d.root.Remove(r)
}

func (d dataDir) RemoveAll(p string) error {
	r, err := d.rel(p)
	if err != nil {
		return err
	}
	return d.root.RemoveAll(r)
}

// WriteFile replaces the file p with b whole (atomicfile): a reader (git
// reading a link to a pool) or a restart after a crash finds the old
// content or the new, never an empty or half-written file.
func (d dataDir) WriteFile(p string, b []byte) error {
	r, err := d.rel(p)
	if err != nil {
		return err
	}
	return atomicfile.WriteIn(d.root, r, b, 0o644)
}

func (d dataDir) ReadFile(p string) ([]byte, error) {
	r, err := d.rel(p)
	if err != nil {
		return nil, err
	}
	return d.root.ReadFile(r)
}

func (d dataDir) Stat(p string) (fs.FileInfo, error) {
	r, err := d.rel(p)
	if err != nil {
		return nil, err
	}
	return d.root.Stat(r)
}

func (d dataDir) Lstat(p string) (fs.FileInfo, error) {
	r, err := d.rel(p)
	if err != nil {
		return nil, err
	}
	return d.root.Lstat(r)
}

func (d dataDir) Chtimes(p string, t time.Time) error {
	r, err := d.rel(p)
	if err != nil {
		return err
	}
	return d.root.Chtimes(r, t, t)
}

// exists tells whether key's mirror (or retired copy) at p is there. A path
// that leaves the data directory through a symlink is an error, so that
// nothing, git included, is run on it.
func (d dataDir) exists(key repokey.Key, p string) (bool, error) {
	_, err := d.Stat(p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("mirror %s: %w", key, err)
}

// removeCutWrites removes from the directories dirs what a WriteFile cut
// short by a crash left there: the new file, not yet renamed into place
// (atomicfile names it "."+name+".<random>.tmp"; git names nothing so). It
// returns the paths it removed.
func (d dataDir) removeCutWrites(dirs ...string) []string {
	var removed []string
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".tmp") &&
				d.Remove(filepath.Join(dir, n)) == nil {
				removed = append(removed, filepath.Join(dir, n))
			}
		}
	}
	return removed
}
