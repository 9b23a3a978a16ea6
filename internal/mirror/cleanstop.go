package mirror

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Unclean start: a machine that crashes (power, kernel, OOM killer) can
// lose the last writes that were still in its page cache, and a mirror
// written then can miss objects that its refs name. A process that stops
// cleanly writes cleanStopMarker in the data directory after its last git
// work; Open removes it. When Open finds none, the last stop was not
// clean, and Scan names the mirrors written in the RecentWindow before the
// newest write it finds on disk (Unchecked): the caller checks them
// (Verify) before it serves them. The newest write stands for the crash,
// whose time nothing records; the writes that a crash can catch half-done
// are the ones before it.

// cleanStopMarker, in the data directory, says that the last process to
// use it stopped cleanly.
const cleanStopMarker = "clean-stop"

// RecentWindow is how long before the newest write found on disk a mirror
// written after an unclean stop is checked before it is served. Linux
// writes dirty pages back within 30 s and file systems commit their
// journal every few seconds: ten minutes is a wide margin.
const RecentWindow = 10 * time.Minute

// openClean removes the clean-stop marker of dataDir and reports whether it
// was there.
func openClean(dataDir string) (bool, error) {
	err := os.Remove(filepath.Join(dataDir, cleanStopMarker))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		// Left in place, it would make the next start after a crash look clean.
		return false, fmt.Errorf("mirror: remove the clean-stop marker: %w", err)
	}
}

// MarkCleanStop records that the process stops cleanly: call it after the
// last git work on the store has ended. What was written is flushed to disk
// first, so that a crash of the machine right after the stop is not taken
// for a clean one. The next Open then checks nothing.
func (s *Store) MarkCleanStop() error {
	flushDisks()
	p := filepath.Join(filepath.Dir(s.root), cleanStopMarker)
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("mirror: write the clean-stop marker: %w", err)
	}
	_, err = fmt.Fprintln(f, s.now().Unix())
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p)
		return fmt.Errorf("mirror: write the clean-stop marker: %w", err)
	}
	return nil
}

// CleanStart tells whether the store was opened after a clean stop.
func (s *Store) CleanStart() bool { return s.clean }

// Unchecked lists, sorted, the mirrors that the last Scan found written
// shortly before an unclean stop: they are to be verified before they are
// served. It is empty after a clean stop.
func (s *Store) Unchecked() []repokey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]repokey.Key(nil), s.unchecked...)
}

// lastWrite is when the mirror at dir was last written, as far as a few
// stats tell: a fetch or a ref update writes packed-refs or a file in
// refs/heads or refs/tags, a fetch or a repack adds a pack, and a first
// clone is renamed into place (the directory itself).
func lastWrite(dir string) time.Time {
	var last time.Time
	for _, rel := range []string{".", "HEAD", "packed-refs", "refs/heads", "refs/tags", "objects", "objects/pack"} {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel))); err == nil && fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	return last
}

// recentlyWritten picks, from when each mirror was last written, the keys
// written within RecentWindow of the newest write, sorted.
func recentlyWritten(written map[repokey.Key]time.Time) []repokey.Key {
	var newest time.Time
	for _, t := range written {
		if t.After(newest) {
			newest = t
		}
	}
	var keys []repokey.Key
	for k, t := range written {
		if !t.Before(newest.Add(-RecentWindow)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
