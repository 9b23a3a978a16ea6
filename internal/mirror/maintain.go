package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Maintenance keeps a mirror cheap to serve. Every fetch adds a pack (or
// loose objects), and a mirror of many small packs, with no bitmap and no
// commit graph, costs a clone several times the CPU of a repacked one. A
// run, under the mirror's lock (so no fetch, pull, prune or verification of
// it runs meanwhile, and the verifier never sees a pack whose index is not
// yet written), does:
//
//   - incremental: `git pack-refs --all`, `git commit-graph write
//     --reachable --split` and `git repack --geometric=2 -d --write-midx
//     --write-bitmap-index` (the small packs and the loose objects rolled
//     into one, the large packs left alone, a multi-pack index with a
//     bitmap over the result);
//   - full, on a mirror's first run and, for a mirror written to since,
//     once the full interval has passed: `git repack -a -d -b --write-midx`
//     (one pack of what the refs reach, a multi-pack index over it with a
//     bitmap: the objects no ref reaches are dropped), `git prune --expire=now` when loose objects are left, and
//     the commit graph written anew. This bounds
//     how long an object that nothing reaches stays, whatever left it (the
//     pruner, prune.go, handles what a fetch dropped within --prune-after).
//
// A pool's member (pool.go) repacks with -l and writes no multi-pack
// index, bitmap or commit graph: it reads its pool's, and one of its own
// left by an earlier version is removed.
//
// Clones and fetches served from the mirror (upload-pack: readers) run
// beside it: git writes each new pack, index, multi-pack index, bitmap and
// commit graph under a temporary name and renames it into place, and removes
// an old pack only once a new one holds its objects; a reader that finds a
// pack gone looks the object up again. So a reader never sees a half-written
// state. The run's own state (when it last ran, when it last ran in full)
// is kept in the mirror (maintMarker), so it survives restarts.

// maintMarker, in a mirror, holds when it was last maintained and last
// maintained in full (Unix seconds).
const maintMarker = "gitfleet-maintained"

// Shape is what a cheap look at a mirror's files tells of its need for
// maintenance. Probe reads it without running git.
type Shape struct {
	Loose       int   // loose objects
	Packs       int   // packs
	NewPacks    int   // packs that no bitmap covers (written after the last run's bitmap)
	PackBytes   int64 // size of the packs
	Bitmap      bool  // a pack bitmap or a multi-pack-index bitmap
	CommitGraph bool
	LastRun     time.Time // zero: never maintained
	LastFull    time.Time // zero: never maintained in full
}

// Thresholds of need: what one unit of need is made of.
const (
	// looseUnit loose objects make a run worthwhile (git gc --auto waits
	// for 6,700; serving cost shows much earlier).
	looseUnit = 64
	// newPackUnit packs that no bitmap covers make a run worthwhile: each
	// pack is one more index to search for every object of a clone.
	newPackUnit = 8
)

// Need is how much a mirror needs maintenance: Score >= 1 means a run is
// due; a higher score is more urgent. Full says that the run will be a full
// one (FullInterval has passed since the last).
type Need struct {
	Score float64
	Full  bool
}

// Due tells whether a run is due.
func (n Need) Due() bool { return n.Score >= 1 }

// NeedOf scores a mirror's shape at now (pure). A mirror never maintained
// in full is due for a full run, and so is one not maintained in full for
// fullInterval that was written to since (a mirror left alone has nothing
// new to drop: a million idle mirrors cost no repack); a mirror with packs
// but no bitmap or no commit graph is due; otherwise loose objects and
// packs no bitmap covers add up, looseUnit or newPackUnit to one.
func NeedOf(sh Shape, now time.Time, fullInterval time.Duration) Need {
	written := sh.NewPacks > 0 || sh.Loose > 0 || sh.LastRun.After(sh.LastFull)
	full := sh.LastFull.IsZero() || (fullInterval > 0 && now.Sub(sh.LastFull) >= fullInterval && written)
	score := float64(sh.Loose)/looseUnit + float64(sh.NewPacks)/newPackUnit
	if sh.Packs+sh.Loose == 0 {
		return Need{} // empty: nothing to do, full or not
	}
	if full || !sh.Bitmap || !sh.CommitGraph {
		score++
	}
	return Need{Score: score, Full: full}
}

// Probe looks at key's mirror's files (a directory listing of objects/ and
// objects/pack, a few stats; no git) and says what shape it is in. A
// mirror that is gone gives an error wrapping fs.ErrNotExist. It takes no
// lock: a probe that races a fetch only misjudges the need a little.
func (s *Store) Probe(key repokey.Key) (Shape, error) {
	return probe(s.Path(key))
}

func probe(dir string) (Shape, error) {
	var sh Shape
	objects := filepath.Join(dir, "objects")
	ents, err := os.ReadDir(objects)
	if err != nil {
		return sh, fmt.Errorf("mirror: probe %s: %w", dir, err)
	}
	// git creates a fan-out directory with its first loose object and
	// prune-packed removes it when empty, so after a run there are none to
	// read: counting exactly costs little.
	for _, e := range ents {
		if e.IsDir() && len(e.Name()) == 2 && isHex(e.Name()) {
			files, _ := os.ReadDir(filepath.Join(objects, e.Name()))
			for _, f := range files {
				if len(f.Name()) == 38 && !strings.HasPrefix(f.Name(), "tmp_") {
					sh.Loose++
				}
			}
		}
	}
	var bitmapAt time.Time
	packs := map[string]time.Time{}
	pdir := filepath.Join(objects, "pack")
	pents, err := os.ReadDir(pdir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return sh, fmt.Errorf("mirror: probe %s: %w", dir, err)
	}
	for _, e := range pents {
		name := e.Name()
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile (a repack)
		}
		switch {
		case strings.HasPrefix(name, "pack-") && strings.HasSuffix(name, ".pack"):
			packs[strings.TrimSuffix(name, ".pack")] = fi.ModTime()
			sh.PackBytes += fi.Size()
		case strings.HasSuffix(name, ".bitmap"):
			sh.Bitmap = true
			if fi.ModTime().After(bitmapAt) {
				bitmapAt = fi.ModTime()
			}
		}
	}
	for base, at := range packs {
		if _, err := os.Stat(filepath.Join(pdir, base+".idx")); err != nil {
			continue // being written: not a pack yet
		}
		sh.Packs++
		if at.After(bitmapAt) {
			sh.NewPacks++
		}
	}
	info := filepath.Join(objects, "info")
	for _, p := range []string{filepath.Join(info, "commit-graph"), filepath.Join(info, "commit-graphs", "commit-graph-chain")} {
		if _, err := os.Stat(p); err == nil {
			sh.CommitGraph = true
		}
	}
	sh.LastRun, sh.LastFull = readMaintMarker(filepath.Join(dir, maintMarker))
	if linked(dir) {
		// A pool's member is served with its pool's bitmap and commit
		// graph, and keeps neither of its own (pool.go).
		sh.Bitmap, sh.CommitGraph = true, true
	}
	return sh, nil
}

// readMaintMarker reads when a mirror was last maintained and last
// maintained in full (zero times when unknown).
func readMaintMarker(p string) (last, full time.Time) {
	b, err := os.ReadFile(p)
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return
	}
	if sec, err := strconv.ParseInt(f[0], 10, 64); err == nil {
		last = time.Unix(sec, 0)
	}
	if sec, err := strconv.ParseInt(f[1], 10, 64); err == nil {
		full = time.Unix(sec, 0)
	}
	return
}

func (s *Store) writeMaintMarker(dir string, last, full time.Time) error {
	body := fmt.Sprintf("%d %d\n", last.Unix(), full.Unix())
	return s.data.WriteFile(filepath.Join(dir, maintMarker), []byte(body))
}

// MaintenanceReport says what a Maintain run did.
type MaintenanceReport struct {
	Ran    bool // false: the mirror is gone, or was empty
	Full   bool
	Before Shape
	After  Shape
}

// Maintain runs maintenance on key's mirror: a full run when the last full
// one is older than fullInterval (or there was none), an incremental one
// otherwise (see the comment at the top of this file). It holds key's lock
// throughout. A mirror that is gone is not an error.
func (s *Store) Maintain(ctx context.Context, key repokey.Key, fullInterval time.Duration) (MaintenanceReport, error) {
	rep, err := s.maintainKey(ctx, key, fullInterval)
	if network := s.Network(key); err == nil && network != "" {
		// The pool, after its member: what the member's fetches shared
		// with it is repacked with the rest (under the pool's lock alone).
		if err := s.MaintainPool(ctx, network); err != nil {
			return rep, fmt.Errorf("mirror %s: maintenance of its pool: %w", key, err)
		}
	}
	return rep, err
}

func (s *Store) maintainKey(ctx context.Context, key repokey.Key, fullInterval time.Duration) (MaintenanceReport, error) {
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	if ok, err := s.data.exists(key, dir); err != nil || !ok {
		return MaintenanceReport{}, err
	}
	before, err := probe(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return MaintenanceReport{}, nil
	}
	if err != nil {
		return MaintenanceReport{}, err
	}
	rep := MaintenanceReport{Before: before, After: before}
	if before.Packs+before.Loose == 0 {
		return rep, nil // an empty repository: nothing to pack
	}
	now := s.now()
	rep.Full = NeedOf(before, now, fullInterval).Full
	if removed := s.removeMaintLocks(dir, now.Add(-s.lockAge())); len(removed) > 0 {
		s.log.Warn("removed stale lock files a killed maintenance left", "key", key, "locks", removed)
	}
	if err := s.expireArchive(ctx, key, dir); err != nil { // archive.go
		s.log.Warn("could not expire archive refs; the next maintenance will", "key", key, "err", err)
	}
	if rep.Full, err = s.maintain(ctx, dir, rep.Full); err != nil {
		if ctx.Err() != nil {
			// Stopped (a shutdown): the git that was killed was ours, under
			// the mirror's lock, and its lock files would fail every run
			// (and a fetch) until they are old enough to be called stale.
			if removed := s.removeMaintLocks(dir, time.Now().Add(time.Hour)); len(removed) > 0 {
				s.log.Info("removed the lock files of a stopped maintenance", "key", key, "locks", removed)
			}
		}
		return rep, fmt.Errorf("mirror %s: maintenance: %w", key, err)
	}
	last, lastFull := now, before.LastFull
	if rep.Full {
		lastFull = now
	}
	if err := s.writeMaintMarker(dir, last, lastFull); err != nil {
		return rep, fmt.Errorf("mirror %s: maintenance: record the run: %w", key, err)
	}
	rep.Ran = true
	if rep.After, err = probe(dir); err != nil {
		return rep, err
	}
	return rep, nil
}

// maintThreads bounds the threads of repack's delta search, so that
// maintenance leaves the machine's other cores to serving.
const maintThreads = "--threads=1"

// maintain runs one maintenance of dir, full or incremental, and reports
// whether it was a full one.
func (s *Store) maintain(ctx context.Context, dir string, full bool) (bool, error) {
	run := func(name string, flags ...string) error {
		return s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: name, Flags: flags})
	}
	member := linked(dir)
	// Loose refs into packed-refs: one file to read instead of one a ref.
	// Under the lock, no fetch of ours is moving a ref meanwhile. A
	// packed-refs.lock held by another process (the lock keeps out
	// gitfleet's own writers, not an operator's git in the data directory)
	// may be a writer's that has stored objects no ref reaches yet: the
	// run is then an incremental one, which drops nothing, and the refs
	// are packed next time.
	if err := run("pack-refs", "--all"); err != nil && !lockedOut(err) {
		return false, fmt.Errorf("pack-refs: %w", err)
	} else if err != nil {
		age := "unknown"
		if fi, serr := os.Stat(filepath.Join(dir, "packed-refs.lock")); serr == nil {
			age = s.now().Sub(fi.ModTime()).Round(time.Second).String()
		}
		s.log.Warn("maintenance: packed-refs is locked by another process; an incremental run only, nothing dropped",
			"dir", filepath.Base(dir), "lock_age", age, "err", err)
		full = false
	}
	if full {
		// Any .keep is one a killed fetch left (no fetch runs under the
		// lock): it would keep its pack, and what it holds, out of -a.
		if kept := s.data.removeKeeps(filepath.Join(dir, "objects", "pack")); len(kept) > 0 {
			s.log.Warn("removed .keep files that a killed fetch left", "dir", filepath.Base(dir), "files", kept)
		}
		// -a -d: one pack of what the refs reach, the old packs deleted
		// with the objects nothing reaches; -b --write-midx: a multi-pack
		// index over it with a bitmap, written anew (a pack rewritten under
		// its old name, as a fresh clone's is, would otherwise keep the old
		// index and its bitmap beside a new bitmap of its own); -n: no info/
		// files for dumb HTTP.
		flags := []string{"-a", "-d", "-b", "--write-midx", "-n", "-q", maintThreads}
		if member {
			flags = memberRepackFlags("-a")
		}
		if err := run("repack", flags...); err != nil {
			return true, fmt.Errorf("repack: %w", err)
		}
		if hasLoose(filepath.Join(dir, "objects")) {
			// Only objects nothing reaches are left loose; under the lock no
			// fetch of ours is writing one that a ref is about to reach.
			if err := run("prune", "--expire=now"); err != nil {
				return true, fmt.Errorf("prune: %w", err)
			}
		}
		if member {
			return true, s.dropCommitGraph(dir)
		}
		// Written anew: the old graph may name commits just pruned.
		return true, writeCommitGraph(ctx, s.git, dir, true)
	}
	// The commit graph first: it does not depend on the packs, and the
	// bitmap's walk reads commits from it instead of inflating each (on a
	// fresh clone of etcd, 0.8-0.9 s for the bitmap against 1.0-1.1 s).
	// A member keeps none (pool.go); one an earlier gitfleet wrote goes.
	graph := func() error { return writeCommitGraph(ctx, s.git, dir, false) }
	if member {
		graph = func() error { return s.dropCommitGraph(dir) }
	}
	if err := graph(); err != nil {
		return false, err
	}
	// --geometric=2: packs are merged until each is at least twice the
	// size of all smaller ones together, so a run rewrites the small packs
	// and loose objects, not the large pack of the clone. Objects nothing
	// reaches stay in their packs until the next full run.
	flags := []string{"--geometric=2", "-d", "--write-midx", "--write-bitmap-index", "-n", "-q", maintThreads}
	if member {
		flags = memberRepackFlags("--geometric=2")
	}
	if err := run("repack", flags...); err != nil {
		return false, fmt.Errorf("repack: %w", err)
	}
	return false, nil
}

// memberRepackFlags are the flags of a repack of a pool's member (pool.go),
// whole (-a) or geometric: -l, so that nothing the pool holds is copied
// back, and no bitmap nor multi-pack index, which must cover every object
// the refs reach (git 2.39's multi-pack index dies on a repository with an
// alternate): a member's clone uses its pool's bitmap.
func memberRepackFlags(mode string) []string {
	return []string{mode, "-d", "-l", "-n", "-q", maintThreads}
}

// writeCommitGraph writes the commit graph of what the refs reach: split
// (a new layer for the new commits, merged with the layers below as git
// judges), or, with replace, one layer in place of the chain.
func writeCommitGraph(ctx context.Context, git *gitcmd.Runner, dir string, replace bool) error {
	split := "--split"
	if replace {
		split = "--split=replace"
	}
	if err := git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "commit-graph write",
		Flags: []string{"--reachable", split, "--no-progress"}}); err != nil {
		return fmt.Errorf("commit-graph write: %w", err)
	}
	return nil
}

// removeMaintLocks removes the lock files of the files maintenance writes
// (multi-pack index, commit graph, packed refs) last modified before
// cutoff: a killed git leaves them, and they would fail every later run.
func (s *Store) removeMaintLocks(dir string, cutoff time.Time) []string {
	var removed []string
	// packed-refs.new is written under packed-refs.lock and goes with it.
	for _, rel := range []string{"packed-refs.lock", "packed-refs.new", "objects/pack/multi-pack-index.lock",
		"objects/info/commit-graph.lock", "objects/info/commit-graphs/commit-graph-chain.lock"} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.ModTime().Before(cutoff) && s.data.Remove(p) == nil {
			removed = append(removed, rel)
		}
	}
	return removed
}
