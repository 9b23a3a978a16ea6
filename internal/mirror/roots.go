package mirror

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// MaxRoots is how many root commits a check reports (the smallest ids):
// enough to tell which network a repository shares history with.
const MaxRoots = 16

// rootsFile, in a mirror, holds its branches' and tags' root commits as
// last counted (at most MaxRoots, sorted), one a line.
const rootsFile = "gitfleet-roots"

// Roots returns the root commits (parentless) that key's branches and tags
// reach, at most MaxRoots, smallest first, after a sync that did res. They
// are counted cheaply: a clone, or a sync that dropped or rewound a ref
// (res.Dropped), counts them all; a sync that only added or advanced refs
// counts only the new commits' roots (rev-list --max-parents=0 NEW --not
// OLD) and adds them to those last counted; a sync that changed nothing
// reads them back.
func (s *Store) Roots(ctx context.Context, key repokey.Key, res Result) ([]string, error) {
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	if ok, err := s.data.exists(key, dir); err != nil || !ok {
		return nil, err
	}
	stored, have := s.readRoots(dir)
	var roots []string
	switch {
	case have && !res.Changed && !res.Cloned:
		return stored, nil
	case have && !res.Cloned && len(res.Dropped) == 0 && !rewound(res.Before, res.After):
		var in strings.Builder
		for ref, oid := range res.After.Refs {
			if res.Before.Refs[ref] != oid {
				in.WriteString(oid + "\n")
			}
		}
		if in.Len() == 0 {
			return stored, nil
		}
		for _, oid := range res.Before.Refs {
			in.WriteString("^" + oid + "\n")
		}
		fresh, err := s.revListRoots(ctx, dir, []string{"--stdin"}, in.String())
		if err != nil {
			return nil, fmt.Errorf("mirror %s: roots: %w", key, err)
		}
		roots = append(stored, fresh...)
	default:
		all, err := s.revListRoots(ctx, dir, []string{"--branches", "--tags"}, "")
		if err != nil {
			return nil, fmt.Errorf("mirror %s: roots: %w", key, err)
		}
		roots = all
	}
	slices.Sort(roots)
	roots = slices.Compact(roots)
	if len(roots) > MaxRoots {
		roots = roots[:MaxRoots]
	}
	if err := s.data.WriteFile(filepath.Join(dir, rootsFile), []byte(strings.Join(roots, "\n")+"\n")); err != nil {
		return nil, fmt.Errorf("mirror %s: roots: %w", key, err)
	}
	return roots, nil
}

// rewound tells whether a ref of before is gone or no longer where it was
// in after when Dropped could not tell (a Result made without it).
func rewound(before, after gitcmd.Refs) bool {
	for ref := range before.Refs {
		if _, ok := after.Refs[ref]; !ok {
			return true
		}
	}
	return false
}

func (s *Store) readRoots(dir string) ([]string, bool) {
	b, err := s.data.ReadFile(filepath.Join(dir, rootsFile))
	if err != nil {
		return nil, false
	}
	return strings.Fields(string(b)), true
}

func (s *Store) revListRoots(ctx context.Context, dir string, flags []string, stdin string) ([]string, error) {
	c := gitcmd.Cmd{GitDir: dir, Name: "rev-list", Flags: append([]string{"--max-parents=0"}, flags...)}
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	out, err := s.git.Output(ctx, c)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}
