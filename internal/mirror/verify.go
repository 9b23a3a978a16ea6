package mirror

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// ErrCorrupt marks a mirror that failed verification: objects are missing
// or unreadable, so a clone from it would fail or be incomplete.
var ErrCorrupt = errors.New("mirror is corrupt")

// Verify checks that key's mirror is whole: every loose object file is
// non-empty, every pack has its index and matches it byte for byte (each
// object's CRC-32, checkPackCRCs: bit rot inside a pack), and every object
// reachable from the refs is present, its commits and trees readable (git
// rev-list --objects --all). Blob contents are not re-hashed: an emptied
// or truncated file is what a disk or a killed writer leaves, a changed
// byte in a pack what a disk's rot leaves, and that is what these cheap
// checks catch. git fsck --connectivity-only finds less and costs 1.5-3x
// more; git fsck and git verify-pack, which find the same as the CRCs,
// cost 10-20x more (BenchmarkVerify). A broken mirror gives an error
// wrapping ErrCorrupt.
func (s *Store) Verify(ctx context.Context, key repokey.Key) error {
	unlock := s.Lock(key)
	defer unlock()
	return s.verifyDir(ctx, "mirror "+key.String(), s.Path(key))
}

// verifyDir is Verify of the repository at dir (a mirror or a pool), named
// what in errors. A member's walk goes through its pool's objects, so a
// broken pool fails its members too.
func (s *Store) verifyDir(ctx context.Context, what, dir string) error {
	if _, err := s.data.Stat(dir); err != nil {
		return fmt.Errorf("%s: verify: %w", what, err)
	}
	if bad := scanObjects(dir); bad != "" {
		return fmt.Errorf("%s: %w: %s", what, ErrCorrupt, bad)
	}
	if bad, err := checkPackCRCs(dir); err != nil {
		return fmt.Errorf("%s: verify: %w", what, err)
	} else if bad != "" {
		return fmt.Errorf("%s: %w: %s", what, ErrCorrupt, bad)
	}
	err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "rev-list", Flags: []string{"--objects", "--all", "--quiet"}})
	if err == nil || ctx.Err() != nil {
		return err
	}
	var ge *gitcmd.Error
	if errors.As(err, &ge) && ge.ExitCode > 0 {
		return fmt.Errorf("%s: %w: %w", what, ErrCorrupt, err)
	}
	return fmt.Errorf("%s: verify: %w", what, err)
}

// scanObjects looks at the object files of a repository without reading
// them: a loose object file is never empty (it is a zlib stream), and a
// pack is useless without its index. It returns what is wrong, or "".
func scanObjects(repo string) string {
	objects := filepath.Join(repo, "objects")
	bad := ""
	_ = filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
		if err != nil || bad != "" {
			return fs.SkipAll
		}
		if d.IsDir() {
			if p != objects && d.Name() != "pack" && len(d.Name()) != 2 {
				return fs.SkipDir // info/, quarantines
			}
			return nil
		}
		rel, _ := filepath.Rel(repo, p)
		fi, err := d.Info()
		if err != nil {
			return nil // removed meanwhile (a repack)
		}
		switch {
		case filepath.Base(filepath.Dir(p)) == "pack":
			if strings.HasSuffix(p, ".pack") {
				idx := strings.TrimSuffix(p, ".pack") + ".idx"
				if ifi, err := os.Stat(idx); err != nil || ifi.Size() == 0 || fi.Size() == 0 {
					bad = "pack or its index missing or empty: " + filepath.ToSlash(rel)
				}
			}
		case fi.Size() == 0:
			bad = "empty object file " + filepath.ToSlash(rel)
		}
		return nil
	})
	return bad
}

// Replace makes a fresh copy of key's mirror from url and puts it in
// place of the current one (a corrupt mirror's repair). The broken copy is
// moved out of the served tree first and the new one is renamed in only
// when complete; if the copy fails, the broken one is put back, for a later
// attempt. It returns the new refs.
func (s *Store) Replace(ctx context.Context, key repokey.Key, url string) (gitcmd.Refs, error) {
	unlock := s.Lock(key)
	defer unlock()
	dst := s.Path(key)
	network := s.networkOf(dst)
	if network != "" {
		if err := s.repairPool(ctx, network); err != nil {
			return gitcmd.Refs{}, fmt.Errorf("mirror %s: repair: %w", key, err)
		}
	}
	old := filepath.Join(s.tmp, "replaced-"+rand.Text())
	if err := s.data.Rename(dst, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return gitcmd.Refs{}, fmt.Errorf("mirror %s: move the broken copy aside: %w", key, err)
	}
	refs, err := s.clone(ctx, key, url, network)
	if err != nil {
		if rerr := s.data.Rename(old, dst); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			s.log.Error("the broken copy of a mirror was not put back after a failed repair: the mirror is missing until it is cloned again", "key", key, "err", rerr)
		}
		return gitcmd.Refs{}, fmt.Errorf("mirror %s: repair: %w", key, err)
	}
	_ = s.data.RemoveAll(old)
	return refs, nil
}
