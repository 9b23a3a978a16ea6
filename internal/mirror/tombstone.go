package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Tombstones: when a source's emptiness is confirmed (emptyguard.go) and
// every branch and tag of a mirror goes, the old tips are kept under
// TombstoneRefs<unix seconds>/<ref> for the tombstone period, so that the
// pruner and maintenance keep their objects (both keep what any ref
// reaches) and a deletion by mistake can be undone by hand (git
// update-ref). These refs are never served (gitserve hides refs/gitfleet/
// and refuses wants that only they reach), never fetched into (the fetch
// refspecs name branches and tags only) and never part of the mirror's
// refs or digest (gitcmd reads MirroredRefs only). tombstoneMarker, in the
// mirror, holds when its oldest tombstone was written, so that Scan finds
// it after a restart without starting git; the pruner deletes the
// tombstones whose period is over and drops their objects.

// TombstoneRefs is the hidden namespace of the tips of deleted refs.
const TombstoneRefs = "refs/gitfleet/deleted/"

const tombstoneMarker = "gitfleet-tombstone"

// DefaultTombstonePeriod is how long the tips of deleted refs are kept
// unless SetTombstonePeriod says otherwise.
const DefaultTombstonePeriod = 7 * 24 * time.Hour

// SetTombstonePeriod sets how long the tips of the refs that a confirmed
// empty advertisement deleted are kept (0: not kept; the objects go at the
// next prune). Call it before the store is used.
func (s *Store) SetTombstonePeriod(d time.Duration) { s.tombstone = max(d, 0) }

// writeTombstones keeps refs (the refs about to be deleted) under
// TombstoneRefs in the mirror at dir and tells the pruner when they
// expire. Caller holds key's lock.
func (s *Store) writeTombstones(ctx context.Context, key repokey.Key, dir string, refs map[string]string) error {
	if s.tombstone <= 0 || len(refs) == 0 {
		return nil
	}
	now := s.now()
	prefix := TombstoneRefs + strconv.FormatInt(now.Unix(), 10) + "/"
	names := make([]string, 0, len(refs))
	for ref := range refs {
		names = append(names, ref)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, ref := range names {
		fmt.Fprintf(&b, "update %s%s %s\n", prefix, ref, refs[ref])
	}
	if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "update-ref", Flags: []string{"--stdin"},
		Stdin: strings.NewReader(b.String())}); err != nil {
		return fmt.Errorf("mirror %s: keep the deleted refs' tips: %w", key, err)
	}
	p := filepath.Join(dir, tombstoneMarker)
	at, ok := readMarker(p)
	if !ok {
		at = now
		if err := s.writeUnix(p, now); err != nil {
			return fmt.Errorf("mirror %s: %w", key, err)
		}
	}
	s.log.Info("the deleted refs' tips are kept, hidden, for the tombstone period", "key", key, "refs", len(names),
		"under", strings.TrimSuffix(prefix, "/"), "until", now.Add(s.tombstone))
	s.notePruneAt(key, at.Add(s.tombstone))
	return nil
}

// expireTombstones deletes the tombstones of the mirror at dir whose
// period is over. It reports whether it deleted any (their objects are then
// to be dropped) and when the next one expires (zero when none is left).
// Caller holds the key's lock.
func (s *Store) expireTombstones(ctx context.Context, dir string) (next time.Time, expired bool, err error) {
	p := filepath.Join(dir, tombstoneMarker)
	if _, ok := readMarker(p); !ok {
		return time.Time{}, false, nil
	}
	out, err := s.git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "for-each-ref", Flags: []string{"--format=%(refname)"},
		Args: []string{TombstoneRefs}})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("list tombstones: %w", err)
	}
	now := s.now()
	var del strings.Builder
	oldest := time.Time{}
	for _, ref := range strings.Fields(string(out)) {
		sec, _, _ := strings.Cut(strings.TrimPrefix(ref, TombstoneRefs), "/")
		n, perr := strconv.ParseInt(sec, 10, 64)
		at := time.Unix(n, 0)
		if perr != nil || !now.Before(at.Add(s.tombstone)) {
			fmt.Fprintf(&del, "delete %s\n", ref)
			continue
		}
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	if del.Len() > 0 {
		if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "update-ref", Flags: []string{"--stdin"},
			Stdin: strings.NewReader(del.String())}); err != nil {
			return time.Time{}, false, fmt.Errorf("delete expired tombstones: %w", err)
		}
	}
	if oldest.IsZero() {
		if err := s.data.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return time.Time{}, del.Len() > 0, fmt.Errorf("remove the tombstone marker: %w", err)
		}
		return time.Time{}, del.Len() > 0, nil
	}
	if err := s.writeUnix(p, oldest); err != nil {
		return time.Time{}, del.Len() > 0, err
	}
	return oldest.Add(s.tombstone), del.Len() > 0, nil
}

// loadTombstones tells the pruner when the tombstones of the mirror at dir
// expire, if it has any (Scan calls it at start).
func (s *Store) loadTombstones(key repokey.Key, dir string) {
	if at, ok := readMarker(filepath.Join(dir, tombstoneMarker)); ok {
		s.notePruneAt(key, at.Add(s.tombstone))
	}
}

// writeUnix writes t as Unix seconds to the file p, as the markers hold it,
// whole and inside the data directory.
func (s *Store) writeUnix(p string, t time.Time) error {
	if err := s.data.WriteFile(p, []byte(strconv.FormatInt(t.Unix(), 10)+"\n")); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(p), err)
	}
	return nil
}
