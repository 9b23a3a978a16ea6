package mirror

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Retired mirrors: a repository removed from a full node is not deleted at
// once but moved to <data>/removed/<key>.git, outside the served tree, so
// that a removal by mistake is undone without a clone. retiredMarker, in
// the retired directory, holds when it was removed (Unix seconds).
const retiredMarker = "gitfleet-removed-at"

func (s *Store) retiredPath(key repokey.Key) string {
	return filepath.Join(filepath.Dir(s.root), "removed", filepath.FromSlash(key.Dir())+".git")
}

// Retire moves key's mirror out of the served tree into the removed area
// (replacing an older retired copy). A missing mirror is not an error. A
// pool's member leaves its pool first (LeaveNetwork): the retired copy is
// whole on its own, and the other members keep theirs.
func (s *Store) Retire(ctx context.Context, key repokey.Key) error {
	if s.Network(key) != "" {
		if err := s.LeaveNetwork(ctx, key); err != nil {
			return fmt.Errorf("mirror %s: retire: %w", key, err)
		}
	}
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	if ok, err := s.data.exists(key, dir); err != nil || !ok {
		return err
	}
	dst := s.retiredPath(key)
	if err := s.data.MkdirAll(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("mirror %s: retire: %w", key, err)
	}
	if err := s.data.RemoveAll(dst); err != nil {
		s.retiredChanged() // part of it may be gone
		return fmt.Errorf("mirror %s: retire: %w", key, err)
	}
	s.retiredChanged() // an older copy of key is gone, whatever follows
	at := strconv.FormatInt(s.now().Unix(), 10)
	if err := s.data.WriteFile(filepath.Join(dir, retiredMarker), []byte(at+"\n")); err != nil {
		return fmt.Errorf("mirror %s: retire: %w", key, err)
	}
	if err := s.data.Rename(dir, dst); err != nil {
		_ = s.data.Remove(filepath.Join(dir, retiredMarker))
		return fmt.Errorf("mirror %s: retire: %w", key, err)
	}
	s.retiredChanged()
	s.pruneEmptyParents(filepath.Dir(dir))
	return nil
}

// AnyRetired tells whether any retired copy may exist (one directory read),
// so that callers can skip looking for each key's.
func (s *Store) AnyRetired() bool {
	f, err := os.Open(filepath.Join(filepath.Dir(s.root), "removed"))
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) > 0
}

// Unretire moves a retired copy of key back into the served tree, if there
// is one and no mirror of key exists. It reports whether it did.
func (s *Store) Unretire(key repokey.Key) (bool, error) {
	unlock := s.Lock(key)
	defer unlock()
	src, dst := s.retiredPath(key), s.Path(key)
	if ok, err := s.data.exists(key, src); err != nil || !ok {
		return false, err
	}
	if ok, err := s.data.exists(key, dst); err != nil || ok {
		return false, err // a mirror is there already: the retired copy expires
	}
	if err := s.data.MkdirAll(filepath.Dir(dst)); err != nil {
		return false, fmt.Errorf("mirror %s: restore: %w", key, err)
	}
	if err := s.data.Rename(src, dst); err != nil {
		return false, fmt.Errorf("mirror %s: restore: %w", key, err)
	}
	s.retiredChanged()
	_ = s.data.Remove(filepath.Join(dst, retiredMarker))
	s.loadMark(key, dst) // a mark it carried out of the tree
	s.pruneRetiredParents(filepath.Dir(src))
	return true, nil
}

// SweepRetired deletes the retired copies removed more than keep ago and
// returns their keys.
func (s *Store) SweepRetired(keep time.Duration) ([]repokey.Key, error) {
	base := filepath.Join(filepath.Dir(s.root), "removed")
	cutoff := s.now().Add(-keep)
	var expired []repokey.Key
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == base {
				return fs.SkipAll
			}
			return nil
		}
		if !d.IsDir() || p == base || !strings.HasSuffix(d.Name(), ".git") {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		key, err := repokey.KeyOfDir(strings.TrimSuffix(filepath.ToSlash(rel), ".git"))
		if err != nil {
			return fs.SkipDir
		}
		b, _ := s.data.ReadFile(filepath.Join(p, retiredMarker))
		sec, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if perr == nil && time.Unix(sec, 0).After(cutoff) {
			return fs.SkipDir
		}
		unlock := s.Lock(key)
		trash := filepath.Join(s.tmp, "expired-"+rand.Text())
		if s.data.Rename(p, trash) == nil {
			s.retiredChanged()
			expired = append(expired, key)
			s.pruneRetiredParents(filepath.Dir(p))
		}
		unlock()
		_ = s.data.RemoveAll(trash)
		return fs.SkipDir
	})
	if err != nil {
		return expired, fmt.Errorf("mirror: sweep removed mirrors: %w", err)
	}
	return expired, nil
}

func (s *Store) pruneRetiredParents(dir string) {
	base := filepath.Join(filepath.Dir(s.root), "removed")
	for dir != base && strings.HasPrefix(dir, base) {
		if s.data.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}
