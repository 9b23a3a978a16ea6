package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// maxDiffKeys is how many keys the changed files of a Diff may hold before
// it loads the old catalog whole instead: past that, a change costs about
// as much as a load anyway.
const maxDiffKeys = 100_000

// DiffResult is what Diff found.
type DiffResult struct {
	Old, New string // the commits compared
	Delta    Delta
	// FilesRead counts the catalog blobs read (a file read twice counts
	// twice); -1 when Whole.
	FilesRead int
	// Whole is set when the old catalog had to be loaded whole (a DEFAULTS
	// file changed, or a key of the change is not plain ASCII, or the
	// change is very large).
	Whole bool
}

// Diff returns what changed between the catalogs at oldRev and newRev, the
// same Delta as Load(oldRev) then Update(newRev), without reading the whole
// old catalog: it reads the files that differ, the DEFAULTS files, and the
// unchanged files that `git grep` finds may list a key of the change (a
// key in two files is a duplicate, and the first one is kept). A key's
// last path segment, any case, is in every spelling of its URL except a
// percent- or YAML-escaped one, so files with "%" or "\" are read too.
func Diff(ctx context.Context, git *gitcmd.Runner, repoDir, oldRev, newRev string, opt Options) (DiffResult, error) {
	oldID, err := resolveCommit(ctx, git, repoDir, oldRev)
	if err != nil {
		return DiffResult{}, err
	}
	newID, err := resolveCommit(ctx, git, repoDir, newRev)
	if err != nil {
		return DiffResult{}, err
	}
	r := DiffResult{Old: oldID, New: newID}
	if oldID == newID {
		return r, nil
	}
	changes, err := diffTree(ctx, git, repoDir, oldID, newID)
	if err != nil {
		return r, err
	}
	changed := make(map[string]bool, len(changes))
	var newBlobs []blob
	for _, ch := range changes {
		kind := classify(ch.path)
		if kind == kindDefaults {
			return diffWhole(ctx, git, repoDir, r, opt)
		}
		changed[ch.path] = true
		if ch.oid != "" {
			newBlobs = append(newBlobs, blob{path: ch.path, oid: ch.oid, kind: kind})
		}
	}
	all, err := lsTree(ctx, git, repoDir, oldID, "")
	if err != nil {
		return r, err
	}
	var defs, oldBlobs []blob
	for _, b := range all {
		switch {
		case b.kind == kindDefaults:
			defs = append(defs, b)
		case changed[b.path]:
			oldBlobs = append(oldBlobs, b)
		}
	}
	// The keys of the change: those of the old and new versions of the
	// changed files.
	oldPart, err := loadBlobs(ctx, git, repoDir, oldID, append(defs[:len(defs):len(defs)], oldBlobs...), opt)
	if err != nil {
		return r, err
	}
	newPart, err := loadBlobs(ctx, git, repoDir, newID, append(defs[:len(defs):len(defs)], newBlobs...), opt)
	if err != nil {
		return r, err
	}
	r.FilesRead = 2*len(defs) + len(oldBlobs) + len(newBlobs)
	segs := make(map[string]bool)
	plain := true
	for _, c := range []*Catalog{oldPart, newPart} {
		c.files.each(func(f *fileData) {
			for _, e := range f.entries {
				seg := e.key[strings.LastIndexByte(e.key, '/')+1:]
				if !printableASCII(seg) {
					plain = false
				}
				segs[strings.ToLower(seg)] = true
			}
		})
	}
	if !plain || len(segs) > maxDiffKeys {
		return diffWhole(ctx, git, repoDir, r, opt)
	}
	var more []blob
	if len(segs) > 0 {
		hits, err := grepFiles(ctx, git, repoDir, oldID, segs)
		if err != nil {
			return r, err
		}
		for _, b := range all {
			if hits[b.path] && !changed[b.path] && b.kind != kindDefaults {
				more = append(more, b)
			}
		}
	}
	base := oldPart
	if len(more) > 0 {
		blobs := append(append(defs[:len(defs):len(defs)], oldBlobs...), more...)
		if base, err = loadBlobs(ctx, git, repoDir, oldID, blobs, opt); err != nil {
			return r, err
		}
		r.FilesRead += len(defs) + len(oldBlobs) + len(more)
	}
	_, d, err := base.Update(ctx, git, repoDir, newID)
	if err != nil {
		return r, err
	}
	r.Delta = d
	r.FilesRead += len(newBlobs)
	return r, nil
}

// diffWhole is Diff by a full load of the old catalog.
func diffWhole(ctx context.Context, git *gitcmd.Runner, repoDir string, r DiffResult, opt Options) (DiffResult, error) {
	old, err := Load(ctx, git, repoDir, r.Old, opt)
	if err != nil {
		return r, err
	}
	_, d, err := old.Update(ctx, git, repoDir, r.New)
	if err != nil {
		return r, err
	}
	r.Delta, r.Whole, r.FilesRead = d, true, -1
	return r, nil
}

// loadBlobs is a Catalog of only blobs (which list the DEFAULTS first) of
// commit id: enough to work out a change that touches only them.
func loadBlobs(ctx context.Context, git *gitcmd.Runner, repoDir, id string, blobs []blob, opt Options) (*Catalog, error) {
	own := make(map[string]map[string]string)
	defFiles, entryFiles, err := readFiles(ctx, git, repoDir, blobs, own, opt)
	if err != nil {
		return nil, err
	}
	var kept, withEntries []*fileData
	for _, f := range append(defFiles, entryFiles...) {
		if f != nil {
			kept = append(kept, f)
			if len(f.entries) > 0 {
				withEntries = append(withEntries, f)
			}
		}
	}
	return &Catalog{commit: id, opt: opt, files: newFileTable(kept), keys: buildKeyIndex(withEntries), defaults: own}, nil
}

// grepFiles lists the files of commit that contain one of segs (any ASCII
// case), a "%" or a "\", with one `git grep` (git scans the blobs, which
// costs far less than parsing them).
func grepFiles(ctx context.Context, git *gitcmd.Runner, repoDir, commit string, segs map[string]bool) (map[string]bool, error) {
	var patterns bytes.Buffer
	patterns.WriteString("%\n\\\n")
	for s := range segs {
		patterns.WriteString(s)
		patterns.WriteByte('\n')
	}
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: repoDir, Name: "grep",
		Flags:     []string{"-i", "-F", "-l", "-z", "--no-color", "--full-name", "-f-"},
		ObjectIDs: []string{commit}, Stdin: &patterns})
	var ge *gitcmd.Error
	if errors.As(err, &ge) && ge.ExitCode == 1 && ge.Stderr == "" {
		return nil, nil // nothing found
	}
	if err != nil {
		return nil, fmt.Errorf("catalog: grep %s for the keys of a change: %w", commit, err)
	}
	hits := make(map[string]bool)
	prefix := commit + ":"
	for rec := range bytes.SplitSeq(out, []byte{0}) {
		if p, ok := strings.CutPrefix(string(rec), prefix); ok {
			hits[p] = true
		}
	}
	return hits, nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] >= 0x7f {
			return false
		}
	}
	return s != ""
}
