package catalog

import (
	"context"
	"fmt"
	"slices"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// Diff returns what changed between the catalogs at two commits (any
// revisions) of repoDir, with the two commit IDs, reading only what the
// change touched: the old versions of the files that differ (`git
// diff-tree`), of the files below a DEFAULTS that changed, and of the
// DEFAULTS above them, then the update to the new commit. Its cost follows
// the change, not the catalog.
//
// It sees a key as the files it reads list it: a key that is also listed
// in a file the change did not touch (a duplicate, which Problems
// reports) may show as added, removed or changed where a diff of the
// whole catalogs (Load, then Update) would show nothing or another kind.
func Diff(ctx context.Context, git *gitcmd.Runner, repoDir, oldRev, newRev string, opt Options) (oldID, newID string, d Delta, err error) {
	if oldID, err = resolveCommit(ctx, git, repoDir, oldRev); err != nil {
		return "", "", Delta{}, err
	}
	if newID, err = resolveCommit(ctx, git, repoDir, newRev); err != nil {
		return "", "", Delta{}, err
	}
	if oldID == newID {
		return oldID, newID, Delta{}, nil
	}
	changes, err := diffTree(ctx, git, repoDir, oldID, newID)
	if err != nil {
		return "", "", Delta{}, err
	}
	old, err := loadTouched(ctx, git, repoDir, oldID, changes, opt)
	if err != nil {
		return "", "", Delta{}, err
	}
	_, d, err = old.apply(ctx, git, repoDir, newID, changes)
	return oldID, newID, d, err
}

// loadTouched reads the part of the catalog at oldID that an update by
// changes needs: the files that differ, those below a DEFAULTS that
// differs, and the DEFAULTS above any of them.
func loadTouched(ctx context.Context, git *gitcmd.Runner, repoDir, oldID string, changes []treeChange, opt Options) (*Catalog, error) {
	have := make(map[string]bool)
	var blobs []blob
	add := func(b blob) {
		if !have[b.path] {
			have[b.path] = true
			blobs = append(blobs, b)
		}
	}
	var defDirs []string
	for _, ch := range changes {
		kind := classify(ch.path)
		if ch.oldOID != "" {
			add(blob{path: ch.path, oid: ch.oldOID, kind: kind})
		}
		if kind == kindDefaults {
			defDirs = append(defDirs, dirOf(ch.path))
		}
	}
	for _, dir := range outermost(defDirs) {
		below, err := lsTree(ctx, git, repoDir, oldID, dir)
		if err != nil {
			return nil, err
		}
		for _, b := range below {
			add(b)
		}
	}
	// The DEFAULTS above what is read, at either commit, give attributes.
	paths := make([]string, 0, len(blobs)+len(changes))
	for _, b := range blobs {
		paths = append(paths, b.path)
	}
	for _, ch := range changes {
		paths = append(paths, ch.path)
	}
	var above []string
	seen := make(map[string]bool)
	for _, p := range paths {
		for dir := dirOf(p); ; dir = dirOf(dir) {
			p := defaultsPath(dir)
			if seen[p] {
				break // and so are the directories above it
			}
			seen[p] = true
			if !have[p] {
				above = append(above, p)
			}
			if dir == "" {
				break
			}
		}
	}
	found, err := lsPaths(ctx, git, repoDir, oldID, above)
	if err != nil {
		return nil, err
	}
	for _, b := range found {
		add(b)
	}
	own := make(map[string]map[string]string)
	defFiles, entryFiles, err := readFiles(ctx, git, repoDir, blobs, own, opt)
	if err != nil {
		return nil, err
	}
	var kept, withEntries []*fileData
	for _, f := range slices.Concat(defFiles, entryFiles) {
		if f != nil {
			kept = append(kept, f)
			if len(f.entries) > 0 {
				withEntries = append(withEntries, f)
			}
		}
	}
	return &Catalog{commit: oldID, opt: opt, files: newFileTable(kept), keys: buildKeyIndex(withEntries), defaults: own}, nil
}

// defaultsPath is the path of the DEFAULTS file of dir.
func defaultsPath(dir string) string {
	if dir == "" {
		return "DEFAULTS"
	}
	return dir + "/DEFAULTS"
}

// lsPaths lists those of paths that are regular catalog files of commit,
// with one ls-tree.
func lsPaths(ctx context.Context, git *gitcmd.Runner, repoDir, commit string, paths []string) ([]blob, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	want := make(map[string]bool, len(paths))
	args := []string{commit}
	for _, p := range paths {
		want[p] = true
		args = append(args, "./"+p) // see lsTree; a glob may match more: filtered below
	}
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: repoDir, Name: "ls-tree",
		Flags: []string{"-z", "--full-tree"}, Args: args})
	if err != nil {
		return nil, fmt.Errorf("catalog: list %d files of %s: %w", len(paths), commit, err)
	}
	return parseLsTree(out, commit, func(path string) bool { return want[path] })
}
