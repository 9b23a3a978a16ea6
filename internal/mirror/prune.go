package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Pruning what the upstream dropped: a fetch that deletes a ref, moves a
// tag, or moves a branch in a way that is not a fast-forward (a force-push
// that took a leaked secret away) leaves objects that no ref reaches; they
// could still be fetched by their ID and they cost disk. Such a fetch marks
// the mirror (pruneMarker, which holds when it was first marked, so that the
// mark survives a restart), and within PruneAfter the mirror is repacked,
// under its lock, without its unreachable objects: `git repack -a -d -b
// --write-midx` (one pack of what the refs reach, with a bitmap, which
// makes clones cheaper) then, when loose objects are left, `git prune --expire=now`. A
// mirror that is marked again before it is pruned keeps its first mark: the
// bound holds however often the upstream rewrites. So that a crash, or a
// shutdown, between the refs' move and the decision loses no mark, the mark
// is written before a fetch that will move or delete a ref (markAhead) and
// removed after it when nothing was dropped (a fast-forward).

// pruneMarker, in a mirror, says that it holds objects to prune.
const pruneMarker = "gitfleet-prune"

// maxAncestryChecks is the most moved branches whose ancestry a fetch
// checks (one git process each); past it the mirror is marked without
// looking: a repack of a mirror with nothing to drop is harmless.
const maxAncestryChecks = 64

// pruneCandidates compares a mirror's refs before and after a fetch. sure
// tells that the fetch certainly dropped objects from the refs' reach, or
// that there are too many moves to check (a deleted ref, a moved tag, more
// than maxAncestryChecks moved branches); otherwise moved lists the moved
// branches, which drop objects unless each old tip is an ancestor of its
// new one. New refs drop nothing.
func pruneCandidates(before, after map[string]string) (sure bool, moved []RefChange) {
	for ref, old := range before {
		nw, ok := after[ref]
		switch {
		case !ok:
			return true, nil
		case nw == old:
		case !strings.HasPrefix(ref, "refs/heads/"):
			return true, nil // a tag object left behind by a moved tag
		default:
			moved = append(moved, RefChange{Ref: ref, Old: old, New: nw})
		}
	}
	if len(moved) > maxAncestryChecks {
		return true, nil
	}
	sort.Slice(moved, func(i, j int) bool { return moved[i].Ref < moved[j].Ref })
	return false, moved
}

// pruneDue is when a mirror marked at markedAt is to be pruned.
func pruneDue(markedAt time.Time, after time.Duration) time.Time {
	return markedAt.Add(max(after, 0))
}

// nextPrune picks, among the due times of marked mirrors, the key to prune
// now (the earliest due, ties by key), or how long to wait for one.
func nextPrune(due map[repokey.Key]time.Time, now time.Time) (key repokey.Key, ok bool, wait time.Duration) {
	first := time.Time{}
	for k, t := range due {
		if key == "" || t.Before(first) || (t.Equal(first) && k < key) {
			key, first = k, t
		}
	}
	if key == "" {
		return "", false, time.Hour
	}
	if first.After(now) {
		return "", false, first.Sub(now)
	}
	return key, true, 0
}

// SetPruneAfter sets how long after a fetch that dropped objects from the
// refs' reach the mirror is pruned (0: as soon as the pruner runs). Call it
// before the store is used.
func (s *Store) SetPruneAfter(d time.Duration) { s.pruneAfter = max(d, 0) }

// markAhead writes dir's prune mark, unless it has one, before a fetch
// that takes its refs from before to next (the listing the fetch asks for)
// when an existing ref will move or go. It reports whether it wrote the
// mark: markIfDropped removes it again when the fetch dropped nothing.
// Caller holds the key's lock.
func (s *Store) markAhead(key repokey.Key, dir string, before, next map[string]string) bool {
	if sure, moved := pruneCandidates(before, next); !sure && len(moved) == 0 {
		return false
	}
	if _, ok := readMarker(filepath.Join(dir, pruneMarker)); ok {
		return false
	}
	if _, err := s.mark(dir); err != nil {
		s.log.Error("could not mark a mirror for pruning", "key", key, "err", err)
		return false
	}
	return true
}

// markIfDropped marks key's mirror at dir for pruning when the fetch that
// took its refs from before to after dropped objects from their reach, and
// otherwise removes the mark that markAhead wrote (ahead). It returns the
// refs whose old tips were dropped (see dropped). Caller holds key's lock.
func (s *Store) markIfDropped(ctx context.Context, key repokey.Key, dir string, before, after gitcmd.Refs, ahead bool) []RefChange {
	gone, why := s.dropped(ctx, dir, before, after)
	return s.markGone(key, dir, gone, why, ahead)
}

// markGone is markIfDropped once dropped has named what went (gone, why).
func (s *Store) markGone(key repokey.Key, dir string, gone []RefChange, why string, ahead bool) []RefChange {
	if len(gone) == 0 {
		if ahead {
			if err := s.data.Remove(filepath.Join(dir, pruneMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.log.Warn("could not remove a mark that was not needed (the mirror will be repacked)", "key", key, "err", err)
				if at, ok := readMarker(filepath.Join(dir, pruneMarker)); ok {
					s.notePrune(key, at)
				}
			}
		}
		return nil
	}
	at, err := s.mark(dir)
	if err != nil {
		s.log.Error("could not mark a mirror for pruning", "key", key, "err", err)
		return gone
	}
	s.log.Info("mirror marked for pruning: the upstream dropped objects", "key", key, "why", why,
		"prune_at", pruneDue(at, s.pruneAfter))
	s.notePrune(key, at)
	return gone
}

// dropped lists, sorted by ref, the refs whose old tips the change from
// before to after leaves behind: deleted refs, moved tags, and branches
// moved other than by a fast-forward (a force-push). When more than
// maxAncestryChecks branches moved, or git cannot tell a branch's
// ancestry, the moved branches count as forced: the list errs on the side
// of naming an old tip. why says what the first of them was.
func (s *Store) dropped(ctx context.Context, dir string, before, after gitcmd.Refs) (gone []RefChange, why string) {
	var moved []RefChange
	for ref, old := range before.Refs {
		nw, ok := after.Refs[ref]
		switch {
		case !ok:
			gone = append(gone, RefChange{Ref: ref, Old: old})
			why = "a ref was deleted or a tag moved"
		case nw == old:
		case !strings.HasPrefix(ref, "refs/heads/"):
			gone = append(gone, RefChange{Ref: ref, Old: old, New: nw})
			why = "a ref was deleted or a tag moved"
		default:
			moved = append(moved, RefChange{Ref: ref, Old: old, New: nw})
		}
	}
	if len(moved) > maxAncestryChecks {
		gone, why, moved = append(gone, moved...), "too many branches moved to check their ancestry", nil
	}
	sort.Slice(moved, func(i, j int) bool { return moved[i].Ref < moved[j].Ref })
	for _, m := range moved {
		if after.ParentOf(m.Ref, m.Old) {
			continue // one commit on top: a fast-forward, no need to ask git
		}
		err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "merge-base", Flags: []string{"--is-ancestor"},
			Args: []string{m.Old, m.New}})
		var ge *gitcmd.Error
		switch {
		case err == nil: // a fast-forward
		case errors.As(err, &ge) && ge.ExitCode == 1:
			gone = append(gone, m)
			why = "a branch was rewritten (not a fast-forward): " + m.Ref
		default:
			// Not commits, or git failed: marking costs one repack.
			gone = append(gone, m)
			why = fmt.Sprintf("the ancestry of %s could not be checked: %v", m.Ref, err)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].Ref < gone[j].Ref })
	return gone, why
}

// mark writes dir's prune marker unless it has one, and returns when the
// mirror was first marked.
func (s *Store) mark(dir string) (time.Time, error) {
	p := filepath.Join(dir, pruneMarker)
	if at, ok := readMarker(p); ok {
		return at, nil
	}
	now := s.now()
	if err := s.data.WriteFile(p, []byte(strconv.FormatInt(now.Unix(), 10)+"\n")); err != nil {
		return now, fmt.Errorf("mirror: mark for pruning: %w", err)
	}
	return now, nil
}

// readMarker reads a prune marker. A marker that cannot be parsed counts as
// marked long ago (prune at once).
func readMarker(p string) (time.Time, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Unix(0, 0), true
	}
	return time.Unix(sec, 0), true
}

// notePrune records key's mark for the pruner and wakes it.
func (s *Store) notePrune(key repokey.Key, markedAt time.Time) {
	s.notePruneAt(key, pruneDue(markedAt, s.pruneAfter))
}

// notePruneAt has the pruner look at key by due (or sooner, when it is due
// sooner already) and wakes it.
func (s *Store) notePruneAt(key repokey.Key, due time.Time) {
	s.mu.Lock()
	if s.prunes == nil {
		s.prunes = map[repokey.Key]time.Time{}
	}
	if t, ok := s.prunes[key]; !ok || due.Before(t) {
		s.prunes[key] = due
	}
	s.mu.Unlock()
	select {
	case s.pruneWake <- struct{}{}:
	default:
	}
}

// loadMark records the mark and the tombstones of the mirror at dir, if
// it has them (Scan calls it at start, so that they survive a restart).
func (s *Store) loadMark(key repokey.Key, dir string) {
	if at, ok := readMarker(filepath.Join(dir, pruneMarker)); ok {
		s.notePrune(key, at)
	}
	s.loadTombstones(key, dir)
}

// PrunePending lists the keys of the mirrors marked for pruning.
func (s *Store) PrunePending() []repokey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]repokey.Key, 0, len(s.prunes))
	for k := range s.prunes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Prune repacks key's mirror without the objects no ref reaches, if it is
// marked or a tombstone of it expired (tombstone.go), and removes the mark.
// It holds key's lock, so no fetch of key runs meanwhile. A mirror that is
// gone is not an error.
func (s *Store) Prune(ctx context.Context, key repokey.Key) error {
	_, err := s.prune(ctx, key)
	return err
}

// prune is Prune, which also tells when the mirror's next tombstone
// expires (zero: none is left).
func (s *Store) prune(ctx context.Context, key repokey.Key) (time.Time, error) {
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	next, expired, err := s.expireTombstones(ctx, dir)
	if err != nil {
		return time.Time{}, fmt.Errorf("mirror %s: prune: %w", key, err)
	}
	marker := filepath.Join(dir, pruneMarker)
	ok, err := s.data.exists(key, marker)
	if err != nil {
		return next, err
	}
	if !ok && !expired {
		return next, nil
	}
	// A .keep would exclude its pack from the repack, with whatever
	// unreachable object it holds. Under the lock no fetch of ours runs
	// here, so any .keep is one that a killed fetch left.
	if kept := s.data.removeKeeps(filepath.Join(dir, "objects", "pack")); len(kept) > 0 {
		s.log.Warn("removed .keep files that a killed fetch left", "key", key, "files", kept)
	}
	// -a -d: one pack of every object the refs reach, the old packs
	// deleted with the unreachable objects they held (no -A, -k or
	// --keep-unreachable, which would keep them); -b --write-midx: with a
	// bitmap, in a multi-pack index written anew, as maintenance writes
	// them (maintain.go).
	// A pool's member drops only what it holds itself (-l): the pool keeps
	// what other members reach, and no member serves what its own refs do
	// not reach.
	flags := []string{"-a", "-d", "-b", "--write-midx", "-q"}
	if linked(dir) {
		flags = memberRepackFlags("-a")
	}
	if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "repack", Flags: flags}); err != nil {
		return next, fmt.Errorf("mirror %s: prune: repack: %w", key, err)
	}
	// The loose objects (a fetch of fewer than fetch.unpackLimit objects
	// may leave them loose) that no ref reaches: the repack packed and
	// removed every loose object the refs reach, so any left is one, and
	// git prune (a walk of every reachable object) runs only then.
	if hasLoose(filepath.Join(dir, "objects")) {
		if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "prune", Flags: []string{"--expire=now"}}); err != nil {
			return next, fmt.Errorf("mirror %s: prune: %w", key, err)
		}
	}
	// A commit graph (maintain.go) may name the commits just dropped: it is
	// written anew, or, in a pool's member, which keeps none of its own
	// (pool.go), removed. The repack was a full one: maintenance need not
	// make another until its interval has passed again.
	if linked(dir) {
		if err := s.dropCommitGraph(dir); err != nil {
			return next, fmt.Errorf("mirror %s: prune: %w", key, err)
		}
	} else if sh, err := probe(dir); err == nil && sh.CommitGraph {
		if err := writeCommitGraph(ctx, s.git, dir, true); err != nil {
			return next, fmt.Errorf("mirror %s: prune: %w", key, err)
		}
	}
	if now := s.now(); s.writeMaintMarker(dir, now, now) != nil {
		s.log.Warn("could not record the pruning as a full maintenance run", "key", key)
	}
	if err := s.data.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return next, fmt.Errorf("mirror %s: prune: remove the mark: %w", key, err)
	}
	return next, nil
}

// removeKeeps removes the .keep files of packDir and returns their names.
func (d dataDir) removeKeeps(packDir string) []string {
	files, _ := packFiles(packDir)
	var removed []string
	for name := range files {
		if strings.HasSuffix(name, ".keep") && d.Remove(filepath.Join(packDir, name)) == nil {
			removed = append(removed, name)
		}
	}
	sort.Strings(removed)
	return removed
}

// hasLoose tells whether the object directory objects holds a loose
// object (a file in one of its two-hex-digit directories).
func hasLoose(objects string) bool {
	ents, err := os.ReadDir(objects)
	if err != nil {
		return true // let git prune look
	}
	for _, e := range ents {
		if !e.IsDir() || len(e.Name()) != 2 || !isHex(e.Name()) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(objects, e.Name()))
		if err != nil || len(files) > 0 {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// pruneRetry is how long a failed pruning waits before the next attempt.
const pruneRetry = time.Minute

// PruneDue prunes every marked mirror that is due now, one at a time, and
// returns how many it pruned. A failure is logged and tried again later.
func (s *Store) PruneDue(ctx context.Context) int {
	n := 0
	for ctx.Err() == nil {
		s.mu.Lock()
		key, ok, _ := nextPrune(s.prunes, s.now())
		s.mu.Unlock()
		if !ok {
			return n
		}
		s.pruneOne(ctx, key)
		n++
	}
	return n
}

func (s *Store) pruneOne(ctx context.Context, key repokey.Key) {
	start := time.Now()
	next, err := s.prune(ctx, key)
	s.mu.Lock()
	switch {
	case err != nil:
		s.prunes[key] = s.now().Add(max(s.pruneAfter, pruneRetry))
	case !next.IsZero(): // tombstones left: looked at again when the next expires
		s.prunes[key] = next
	default:
		delete(s.prunes, key)
	}
	s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("pruning failed; will try again", "key", key, "err", err)
		}
		return
	}
	s.log.Info("mirror pruned: objects no ref reaches are gone", "key", key, "took", time.Since(start).Round(time.Millisecond))
}

// RunPruner prunes marked mirrors as they become due, until ctx ends.
// Marks made before the store was opened are found by Scan.
func (s *Store) RunPruner(ctx context.Context) {
	for ctx.Err() == nil {
		s.PruneDue(ctx)
		s.mu.Lock()
		_, _, wait := nextPrune(s.prunes, s.now())
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-s.pruneWake:
		case <-s.clk.After(min(max(wait, time.Millisecond), time.Minute)):
		}
	}
}

// settleFailed handles the mark that markAhead wrote (ahead) before a
// fetch or ref update that failed: when the refs are still as before
// (--atomic, update-ref's transaction) nothing was dropped and the mark
// goes; when they cannot be read, or moved, it is kept for the pruner.
func (s *Store) settleFailed(ctx context.Context, key repokey.Key, dir string, before gitcmd.Refs, ahead bool) {
	if !ahead {
		return
	}
	now, err := s.git.StoredRefs(context.WithoutCancel(ctx), dir)
	if err == nil && now.Digest() == before.Digest() {
		if err := s.data.Remove(filepath.Join(dir, pruneMarker)); err == nil || errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
	s.loadMark(key, dir)
}
