package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Limits bound what an upstream can make a mirror store. The zero value
// bounds nothing.
type Limits struct {
	// MaxRepoSize is the most bytes one mirror may hold on disk; a fetch
	// that would pass it is stopped while the pack streams in, and a mirror
	// already over it is not fetched (gitcmd.ClassTooLarge). 0: none.
	MaxRepoSize int64
	// MaxRefs and MaxRefLength: see gitcmd.RefLimits.
	MaxRefs      int
	MaxRefLength int
	// WatchInterval is how often the size of a running fetch is read
	// (default 100 ms): a fetch can pass MaxRepoSize by what arrives in
	// one interval before it is stopped.
	WatchInterval time.Duration
}

// DefaultWatchInterval is Limits.WatchInterval's default.
const DefaultWatchInterval = 100 * time.Millisecond

// SetLimits sets the limits of every later Sync. Call it before the store
// is used.
func (s *Store) SetLimits(l Limits) {
	if l.WatchInterval <= 0 {
		l.WatchInterval = DefaultWatchInterval
	}
	s.limits = l
}

func (s *Store) refLimits() gitcmd.RefLimits {
	return gitcmd.RefLimits{MaxRefs: s.limits.MaxRefs, MaxRefLength: s.limits.MaxRefLength, CaseInsensitiveFS: s.foldsCase}
}

// listRefs lists url's branches and tags under the limits, and logs the
// refs it skips once per repository.
func (s *Store) listRefs(ctx context.Context, key repokey.Key, url string) (gitcmd.Listing, error) {
	l, err := s.git.ListRefs(ctx, url, s.refLimits())
	if err != nil {
		return l, err
	}
	s.logSkipped(key, l.Skipped)
	return l, nil
}

// logSkipped logs, once per repository, the refs of its upstream that a
// listing skipped.
func (s *Store) logSkipped(key repokey.Key, skipped []string) {
	if len(skipped) == 0 {
		return
	}
	s.mu.Lock()
	first := !s.skipLogged[key]
	s.skipLogged[key] = true
	s.mu.Unlock()
	if first {
		name := skipped[0]
		if len(name) > 80 {
			name = name[:80] + "..."
		}
		s.log.Warn("skipping refs that cannot be mirrored (too long, control characters, or a component too long for a file name); the rest is mirrored",
			"key", key, "skipped", len(skipped), "first", name, "max_ref_length", s.limits.MaxRefLength)
	}
}

// errTooLarge is the cause given to a fetch stopped by the size watch.
var errTooLarge = errors.New("mirror: over the size limit")

func tooLarge(url string, size, limit int64, while bool) error {
	msg := fmt.Sprintf("the mirror holds %d bytes, over --max-repo-size %d", size, limit)
	if while {
		msg = fmt.Sprintf("stopped at %d bytes: the repository is larger than --max-repo-size %d", size, limit)
	}
	return &gitcmd.Error{Args: []string{"fetch", url}, ExitCode: -1, Class: gitcmd.ClassTooLarge, Stderr: msg, Err: errTooLarge}
}

// fetch fetches the branches and tags of url into the repository at dir,
// leaving out the skipped refs, and stops it if the repository would
// outgrow MaxRepoSize. (A fetch that completes within one watch interval
// can pass it: see checkCloneSize; a mirror left over it is not fetched
// again.) refsBefore is the digest of the repository's refs
// before the fetch: a fetch stopped by the size watch that moved no ref
// leaves nothing behind.
func (s *Store) fetch(ctx context.Context, dir, url string, skipped []string, refsBefore string) error {
	c := gitcmd.Cmd{GitDir: dir, Name: "fetch", Config: FsckConfig(),
		Flags: []string{"--prune", "--atomic", "--no-write-fetch-head", "--no-tags", "--quiet", "--no-auto-gc"},
		Args:  append([]string{url}, gitcmd.FetchRefspecs...)}
	if neg := negativeRefspecs(skipped); neg != "" {
		// On stdin: a few thousand long names would not fit in argv.
		c.Flags = append(c.Flags, "--stdin")
		c.Stdin = strings.NewReader(neg)
	}
	return s.runFetch(ctx, c, dir, url, refsBefore)
}

// runFetch runs the fetch c into the repository at dir from url under
// MaxRepoSize (see fetch).
func (s *Store) runFetch(ctx context.Context, c gitcmd.Cmd, dir, url, refsBefore string) error {
	packDir := filepath.Join(dir, "objects", "pack")
	limit := s.limits.MaxRepoSize
	if limit <= 0 {
		err := s.git.Run(ctx, c)
		if err != nil {
			s.data.removeTemporary(dir)
		}
		return err
	}
	base, err := TreeSize(dir)
	if err != nil {
		return fmt.Errorf("mirror: size of %s: %w", dir, err)
	}
	if over(base, limit) {
		return tooLarge(url, base, limit, false)
	}
	// Every object then arrives as a pack under objects/pack (no loose
	// objects from unpack-objects), which is where the watch looks.
	c.Config = append(c.Config, "fetch.unpackLimit=1")
	before, err := packFiles(packDir)
	if err != nil {
		return fmt.Errorf("mirror: read %s: %w", packDir, err)
	}
	packBase := sumSizes(before)
	err = s.watch(ctx, c, func() int64 {
		now, _ := packFiles(packDir)
		return base + sumSizes(now) - packBase + incomingSize(dir)
	}, limit)
	if err == nil {
		return nil
	}
	s.data.removeTemporary(dir)
	if gitcmd.ClassOf(err) == gitcmd.ClassTooLarge {
		// The watch may have fired as the refs moved: only a fetch that
		// moved no ref owns the packs that appeared.
		if refs, rerr := s.git.StoredRefs(context.WithoutCancel(ctx), dir); rerr == nil && refs.Digest() == refsBefore {
			s.data.removeNewPacks(packDir, before)
		}
	}
	return err
}

// watch runs c while reading size() every WatchInterval, and kills git's
// process group when size() passes limit.
func (s *Store) watch(ctx context.Context, c gitcmd.Cmd, size func() int64, limit int64) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- s.git.Run(ctx, c) }()
	tick := time.NewTicker(s.limits.WatchInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if n := size(); over(n, limit) {
				cancel(errTooLarge)
				<-done
				return tooLarge(c.Args[0], n, limit, true)
			}
		}
	}
}

// checkCloneSize refuses a completed clone at dir over MaxRepoSize (it
// arrived within one watch interval): the caller discards it.
func (s *Store) checkCloneSize(dir, url string) error {
	if s.limits.MaxRepoSize <= 0 {
		return nil
	}
	size, err := TreeSize(dir)
	if err != nil {
		return fmt.Errorf("mirror: size of %s: %w", dir, err)
	}
	if over(size, s.limits.MaxRepoSize) {
		return tooLarge(url, size, s.limits.MaxRepoSize, true)
	}
	return nil
}

// over is the watch's rule: a repository of n bytes passes limit.
func over(n, limit int64) bool { return limit > 0 && n > limit }

func negativeRefspecs(skipped []string) string {
	var b strings.Builder
	for _, name := range skipped {
		if rs, ok := gitcmd.NegativeRefspec(name); ok {
			b.WriteString(rs)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// packFiles lists the files of objects/pack with their sizes, including
// the tmp_pack_* that index-pack is writing.
func packFiles(packDir string) (map[string]int64, error) {
	ents, err := os.ReadDir(packDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return map[string]int64{}, nil
		}
		return nil, err
	}
	out := make(map[string]int64, len(ents))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			out[e.Name()] = fi.Size()
		}
	}
	return out, nil
}

func sumSizes(files map[string]int64) int64 {
	var n int64
	for _, sz := range files {
		n += sz
	}
	return n
}

// incomingSize is the size of the quarantine directories
// (objects/incoming-*) that git writes objects to before a ref moves.
func incomingSize(dir string) int64 {
	matches, _ := filepath.Glob(filepath.Join(dir, "objects", "incoming-*"))
	var n int64
	for _, m := range matches {
		sz, _ := TreeSize(m)
		n += sz
	}
	return n
}

// TreeSize is the total size of the regular files under dir (a mirror, or
// the mirrors of a node: its disk use).
func TreeSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file git renamed or removed meanwhile
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

// removeTemporary deletes what a failed fetch left in the repository at
// dir: index-pack's temporary files and quarantines. Nothing points into
// them.
func (d dataDir) removeTemporary(dir string) {
	packDir := filepath.Join(dir, "objects", "pack")
	now, _ := packFiles(packDir)
	for name := range now {
		if strings.HasPrefix(name, "tmp_") {
			_ = d.Remove(filepath.Join(packDir, name))
		}
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "objects", "incoming-*"))
	for _, m := range matches {
		_ = d.RemoveAll(m)
	}
}

// removeNewPacks deletes the packs that were not in packDir before a
// failed fetch that moved no ref.
func (d dataDir) removeNewPacks(packDir string, before map[string]int64) {
	now, _ := packFiles(packDir)
	for name := range now {
		if _, old := before[name]; !old {
			_ = d.Remove(filepath.Join(packDir, name))
		}
	}
}
