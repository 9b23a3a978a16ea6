package mirror

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// fetchClearingLocks fetches url into key's mirror at dir. When git fails
// on a lock file that exists, and every such lock in the repository is older
// than the git timeout (so no git process of ours can still hold it: each
// is killed at that age), the locks are removed, the event logged, and the
// fetch retried once. Caller holds key's lock.
func (s *Store) fetchClearingLocks(ctx context.Context, key repokey.Key, dir, url string, skipped []string, refsBefore string) error {
	err := s.fetch(ctx, dir, url, skipped, refsBefore)
	if err == nil || !lockedOut(err) {
		return err
	}
	removed, young := s.removeStaleLocks(dir, s.now().Add(-s.lockAge()))
	if len(removed) == 0 {
		if young > 0 {
			return fmt.Errorf("mirror %s: a lock file is held (younger than the git timeout %v, so left alone): %w", key, s.lockAge(), err)
		}
		return err
	}
	s.log.Warn("removed stale lock files that blocked a fetch; retrying once", "key", key, "locks", removed)
	return s.fetch(ctx, dir, url, skipped, refsBefore)
}

// lockedOut tells whether a git failure is a lock file that exists.
func lockedOut(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, ".lock") && (strings.Contains(msg, "File exists") || strings.Contains(msg, "cannot lock ref"))
}

// lockAge is the age past which a lock file cannot belong to a running git
// of this process: the runner kills every git at its timeout.
func (s *Store) lockAge() time.Duration { return s.git.Timeout() }

func (s *Store) now() time.Time {
	if s.clk == nil {
		return time.Now()
	}
	return s.clk.Now()
}

// removeStaleLocks removes the ref lock files of repo (packed-refs.lock,
// HEAD.lock, config.lock, shallow.lock and *.lock under refs/) last
// modified before cutoff. It returns the paths removed (relative to repo)
// and how many locks were too young to remove.
func (s *Store) removeStaleLocks(repo string, cutoff time.Time) (removed []string, young int) {
	try := func(p string) {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		if fi.ModTime().After(cutoff) {
			young++
			return
		}
		if s.data.Remove(p) == nil {
			rel, _ := filepath.Rel(repo, p)
			removed = append(removed, filepath.ToSlash(rel))
		}
	}
	for _, name := range []string{"packed-refs.lock", "HEAD.lock", "config.lock", "shallow.lock"} {
		try(filepath.Join(repo, name))
	}
	_ = filepath.WalkDir(filepath.Join(repo, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".lock") {
			try(p)
		}
		return nil
	})
	return removed, young
}
