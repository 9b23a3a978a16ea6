// Package mirror keeps a node's bare mirrors on disk, one a repository key
// at <data>/repos/<the key's directory>.git (Key.Dir), and makes every
// change to them. Its API takes keys as repokey.Key, parsed where they
// entered the process, and does not validate them again; the keys it
// reads from disk (Scan, a pool's member files, retired copies) it parses
// itself. A directory under repos/ is always a complete repository:
//
//   - A first mirror is made in <data>/tmp, with one ref listing and one
//     fetch of what it listed, its bitmap written at once, and renamed into
//     place when complete (firstmirror.go).
//   - A sync lists the upstream's refs and fetches only when they differ,
//     moving every ref at once (--atomic) and checking every object
//     received (fsck.go). Git work on one key is serialised (Lock).
//   - What an upstream can make it store is bounded (Limits: the size,
//     while the pack streams in; the number of refs; their names), and the
//     objects that a fetch which deleted or rewrote refs left unreachable
//     are dropped within a bounded time (prune.go).
//   - What a volunteer serves enters a mirror only through a verified pull
//     (quarantine.go): only the ref changes its upstream confirms, and no
//     more than the size limit allows (pullsize.go).
//   - A source that suddenly advertises nothing is believed only when it
//     says so again at a check an hour later or more (emptyguard.go), the
//     old tips then kept, hidden, for a tombstone period (tombstone.go).
//   - With the archive policy (opt-in: ArchivePolicy), the tips that a
//     force-push or a deletion takes away are kept, hidden, under
//     refs/archive/<unix time>/<ref>, written before a sync's fetch or in
//     a verified pull's own transaction, capped a repository and expired
//     in maintenance (archive.go).
//   - The mirrors of a fork network share one object pool under
//     <data>/pools (pool.go).
//   - Maintenance repacks mirrors geometrically, with bitmaps and a commit
//     graph, and now and then whole without what no ref reaches
//     (maintain.go). A mirror can be verified (every packed object against
//     its index's CRC-32, every object the refs reach present) and
//     replaced by a fresh copy (verify.go).
//   - Removal renames a mirror out of repos/ and deletes it (Remove), or
//     moves it to <data>/removed, to be undone (retire.go).
//   - After a crash, Open empties tmp, and Scan removes the lock files and
//     the writes cut short that a killed git or process left and, after an
//     unclean stop, names the mirrors written just before it, to be
//     verified first (cleanstop.go). A fetch that meets a lock file older
//     than the git timeout removes it and tries once more (locks.go).
//
// Its own file operations on mirrors, pools, quarantines and the retired
// area go through an os.Root on the data directory (confine.go), so a
// symlink planted there cannot make it create, rename or delete anything
// outside; the files it writes there (markers, a member's alternates) are
// written whole (atomicfile), so that git reading one, or a start after a
// crash, finds the old content or the new. git is given paths: the store
// checks a mirror's through the root before it runs git on it.
//
// It decides nothing about when to fetch or from where: callers pass URLs.
package mirror

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Store is the set of bare mirrors under one data directory.
type Store struct {
	data dataDir // every file operation on a key's path goes through it (confine.go)
	root string  // <data>/repos
	tmp  string  // <data>/tmp
	git  *gitcmd.Runner
	log  *slog.Logger
	clk  clock.Clock // the age of lock files and of retired mirrors

	limits Limits

	mu         sync.Mutex
	locks      map[string]*keyLock
	skipLogged map[repokey.Key]bool // keys whose skipped refs were logged
	empty      emptyGuard           // emptyguard.go
	retired    retiredSize          // retiredsize.go

	archive     ArchivePolicy             // archive.go
	pruneAfter  time.Duration             // prune.go
	tombstone   time.Duration             // tombstone.go
	headRecheck time.Duration             // WithHeadRecheck
	prunes      map[repokey.Key]time.Time // marked keys -> when to prune them
	pruneWake   chan struct{}

	foldsCase bool // the file system treats Master and master as one name

	suspects map[repokey.Key]bool // members of a pool made anew (pool.go)

	// testHookPlaced, when set (by tests only), runs when a clone has been
	// moved into place, before it is shared with its pool.
	testHookPlaced func(key repokey.Key)
	// testHookCut, when set (by tests only), runs when a leaving member's
	// link to its pool has been cut, before it is checked whole without it.
	testHookCut func(key repokey.Key)
	// testHookDropped, when set (by tests only), runs when a pool's
	// repack has dropped what no member reaches, before the rest of its run.
	testHookDropped func(network string)

	clean     bool          // opened after a clean stop (cleanstop.go)
	unchecked []repokey.Key // written shortly before an unclean stop, found by Scan
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// Option sets up a Store when it is opened.
type Option func(*Store)

// WithClock makes clk the time of the store's rules: the age of lock files
// and of retired mirrors, and when marked mirrors are pruned. The default
// is the wall clock.
func WithClock(clk clock.Clock) Option {
	return func(s *Store) {
		if clk != nil {
			s.clk = clk
		}
	}
}

// TempDir is the store's scratch directory under dataDir, emptied by
// every Open: a file that must not outlive a killed process (a partial
// clone, a trace of a fetch's headers) is made there.
func TempDir(dataDir string) string { return filepath.Join(dataDir, "tmp") }

// Open prepares <dataDir>/repos and <dataDir>/tmp, deleting whatever a
// killed process left in tmp, and removes the clean-stop marker, noting
// whether it was there (cleanstop.go).
func Open(dataDir string, git *gitcmd.Runner, log *slog.Logger, opts ...Option) (*Store, error) {
	// git runs in a neutral directory (package gitcmd): its paths are absolute.
	absData, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("mirror: data directory %q: %w", dataDir, err)
	}
	dataDir = absData
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	data, err := openDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	s := &Store{
		data:  data,
		root:  filepath.Join(dataDir, "repos"),
		tmp:   TempDir(dataDir),
		git:   git,
		log:   log,
		clk:   clock.Real{},
		locks: make(map[string]*keyLock),

		skipLogged:  make(map[repokey.Key]bool),
		prunes:      make(map[repokey.Key]time.Time),
		pruneWake:   make(chan struct{}, 1),
		tombstone:   DefaultTombstonePeriod,
		headRecheck: DefaultHeadRecheck,
		archive:     ArchivePolicy{MaxRefs: DefaultArchiveMaxRefs},
	}
	for _, o := range opts {
		o(s)
	}
	if err = s.data.RemoveAll(s.tmp); err != nil {
		data.root.Close()
		return nil, fmt.Errorf("mirror: clean %s: %w", s.tmp, err)
	}
	for _, d := range []string{s.root, s.tmp} {
		if err := s.data.MkdirAll(d); err != nil {
			data.root.Close()
			return nil, fmt.Errorf("mirror: %w", err)
		}
	}
	if s.clean, err = openClean(dataDir); err != nil {
		data.root.Close()
		return nil, err
	}
	folds, err := FoldsCase(s.tmp)
	if err != nil {
		data.root.Close()
		return nil, fmt.Errorf("mirror: %w", err)
	}
	s.foldsCase = folds
	if folds {
		log.Warn("the data directory's file system is case-insensitive: mirrors are laid out apart by case, "+
			"and of two refs that differ only in case, one is skipped", "dir", s.root)
	}
	return s, nil
}

// FoldsCase tells whether the file system of dir treats names that differ
// only in case as one (macOS's and Windows' do by default), by creating a
// file and looking for it under another case.
func FoldsCase(dir string) (bool, error) {
	f, err := os.CreateTemp(dir, "case-probe-a-")
	if err != nil {
		return false, fmt.Errorf("probe the file system's case rules in %s: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	base := filepath.Base(name)
	_, err = os.Lstat(filepath.Join(dir, strings.ToUpper(base)))
	return err == nil, nil
}

// Close releases the data directory. The store is not used after it.
func (s *Store) Close() error { return s.data.root.Close() }

// FoldsCaseOnDisk tells whether the mirrors' file system folds case (see
// FoldsCase), as probed when the store was opened.
func (s *Store) FoldsCaseOnDisk() bool { return s.foldsCase }

// Root is the directory that holds the repositories.
func (s *Store) Root() string { return s.root }

// Path is the directory of key's mirror. Upper-case letters are escaped
// (repokey.Key.Dir), so that keys that differ only in case
// stay apart on a case-insensitive file system.
func (s *Store) Path(key repokey.Key) string {
	return filepath.Join(s.root, filepath.FromSlash(key.Dir())+".git")
}

// Has reports whether key's mirror exists (and so is complete).
func (s *Store) Has(key repokey.Key) bool {
	fi, err := s.data.Stat(s.Path(key))
	return err == nil && fi.IsDir()
}

// Lock serialises git work on key; call the returned function to unlock.
func (s *Store) Lock(key repokey.Key) func() { return s.lock(string(key)) }

// lock serialises the work on name: a key, or a pool (poolLockKey).
func (s *Store) lock(name string) func() {
	s.mu.Lock()
	l := s.locks[name]
	if l == nil {
		l = &keyLock{}
		s.locks[name] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(s.locks, name)
		}
		s.mu.Unlock()
	}
}

// Result says what a Sync did.
type Result struct {
	Cloned  bool // the mirror did not exist and was cloned
	Fetched bool // objects were fetched (refs differed)
	Changed bool // the mirror's refs changed
	Before  gitcmd.Refs
	After   gitcmd.Refs
	// Dropped are the refs whose old tips the sync left behind (deleted,
	// moved tags, force-pushed branches), sorted by ref, so that the
	// fetch log keeps their old IDs.
	Dropped []RefChange
}

// Sync brings key's mirror up to date with url: a clone if there is none,
// otherwise a cheap ref listing and a fetch only when the refs differ.
func (s *Store) Sync(ctx context.Context, key repokey.Key, url string) (Result, error) {
	return s.SyncIn(ctx, key, url, "")
}

// SyncIn is Sync for a member of network's object pool ("": a standalone
// mirror; see pool.go): a mirror of another network (or none) changes
// pools first (JoinNetwork), a clone starts from the pool, and what a
// fetch brought is shared with the pool at once, so that the next member
// to fetch it has it.
func (s *Store) SyncIn(ctx context.Context, key repokey.Key, url, network string) (Result, error) {
	if s.Has(key) && s.Network(key) != network {
		if err := s.JoinNetwork(ctx, key, network); err != nil {
			return Result{}, err
		}
	}
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	if ok, err := s.data.exists(key, dir); err != nil {
		return Result{}, err
	} else if !ok {
		after, err := s.clone(ctx, key, url, network)
		if err != nil {
			return Result{}, err
		}
		return Result{Cloned: true, Fetched: true, Changed: true, After: after}, nil
	}
	before, err := s.git.StoredRefs(ctx, dir) // no process on a plain layout: most checks end here
	if err != nil {
		return Result{}, fmt.Errorf("mirror %s: read refs: %w", key, err)
	}
	remote, err := s.listRefs(ctx, key, url)
	if err != nil {
		return Result{Before: before, After: before}, err
	}
	confirmed, err := s.empty.admit(key, url, before, remote.Refs, s.now())
	if err != nil {
		return Result{Before: before, After: before}, fmt.Errorf("mirror %s: %w", key, err)
	}
	res := Result{Before: before, After: before}
	if confirmed {
		// Every branch and tag goes: not before their tips are kept.
		if err := s.writeTombstones(ctx, key, dir, before.Refs); err != nil {
			return res, err
		}
		s.log.Warn("the source's empty advertisement is confirmed: every branch and tag of the mirror is deleted", "key", key)
	}
	if remote.Digest() == before.Digest() {
		// No ref moved: HEAD alone may have (a default branch switched
		// among existing branches), asked once per head recheck.
		if !s.headStale(dir) {
			return res, nil
		}
		head, err := s.git.RemoteHead(ctx, url)
		if err != nil {
			return res, fmt.Errorf("mirror %s: ask the upstream's HEAD: %w", key, err)
		}
		return s.followHead(ctx, dir, head, res)
	}
	ahead := s.markAhead(key, dir, before.Refs, remote.Refs.Refs)
	// HEAD is asked for on every sync that sees the refs move (the listing
	// above asks for branches and tags only, so that an upstream's other
	// refs never cross the network on a check that finds nothing new),
	// beside the fetch, so that the sync waits for one round trip, not
	// two. Every return waits for the ask (deferred before the unlock
	// runs), so that no git of this sync runs once the mirror's lock is
	// released.
	var head string
	var headErr error
	var asking sync.WaitGroup
	defer asking.Wait()
	asking.Go(func() { head, headErr = s.git.RemoteHead(ctx, url) })
	// The tips the fetch may take away are kept first (archive.go).
	var archived, preArchived []ArchivedRef
	archive := s.archiving(key)
	if archive {
		var err error
		if archived, preArchived, err = s.archiveAhead(ctx, key, dir, before.Refs, remote.Refs.Refs); err != nil {
			s.settleFailed(ctx, key, dir, before, ahead)
			return res, err
		}
	}
	if err := s.fetchClearingLocks(ctx, key, dir, url, remote.Skipped, before.Digest()); err != nil {
		if ctx.Err() != nil {
			s.cleanLocks(dir) // a fetch stopped (killed) leaves its temporary files
		}
		if archive {
			s.settleArchiveFailed(ctx, key, dir, before, archived, preArchived)
		}
		s.settleFailed(ctx, key, dir, before, ahead)
		return res, err
	}
	res.Fetched = true
	after, err := s.git.LocalRefs(ctx, dir)
	if err != nil {
		if ahead { // the refs may have moved: keep the mark
			s.loadMark(key, dir)
		}
		return res, fmt.Errorf("mirror %s: read refs: %w", key, err)
	}
	res.After = after
	res.Changed = after.Digest() != before.Digest()
	res.Dropped = s.markIfDropped(ctx, key, dir, before, after, ahead)
	if archive {
		s.settleArchive(ctx, key, dir, archived, preArchived, res.Dropped)
	}
	if res.Changed && network != "" {
		if err := s.share(ctx, key, dir, network); err != nil {
			s.log.Warn("could not add a member's new objects to its pool; the next fetch will", "key", key, "network", network, "err", err)
		}
	}
	asking.Wait()
	if headErr != nil {
		return res, fmt.Errorf("mirror %s: ask the upstream's HEAD: %w", key, headErr)
	}
	return s.followHead(ctx, dir, head, res)
}

// DefaultHeadRecheck is how long the upstream's HEAD is taken as unchanged
// while no ref moves, unless WithHeadRecheck says otherwise.
const DefaultHeadRecheck = 24 * time.Hour

// WithHeadRecheck makes d the longest a mirror goes without asking its
// upstream for HEAD while no ref moves (a sync that sees a ref move always
// asks). A node sets half its --max-interval, so that a default branch
// switched with no ref moving is followed within about one --max-interval
// (a repository checked every --max-interval asks at every check). d <= 0
// keeps DefaultHeadRecheck.
func WithHeadRecheck(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.headRecheck = d
		}
	}
}

// headStale tells whether the mirror at dir last asked its upstream for
// HEAD a head recheck ago or more: the time is the mtime of its HEAD file,
// set at every ask, so that it holds across restarts.
func (s *Store) headStale(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "HEAD"))
	return err != nil || s.now().Sub(fi.ModTime()) >= s.headRecheck
}

// followHead points the mirror at dir's HEAD at head, the upstream's
// answer, when it names another branch, and marks the ask (the mtime of
// HEAD) either way. res.After.Head says what HEAD became; a caller sees a
// switch as res.Before.Head != res.After.Head.
func (s *Store) followHead(ctx context.Context, dir, head string, res Result) (Result, error) {
	if head != "" && head != res.After.Head && strings.HasPrefix(head, "refs/heads/") {
		if err := s.setHead(ctx, dir, head); err != nil {
			return res, err
		}
		res.After.Head = head
	}
	now := s.now()
	_ = s.data.Chtimes(filepath.Join(dir, "HEAD"), now)
	return res, nil
}

// ExpireHead makes the next sync of key's mirror ask its upstream for
// HEAD even when no ref moved (an urgent check: a forge's feed may have
// seen the default branch change). A key not mirrored is left alone.
func (s *Store) ExpireHead(key repokey.Key) {
	_ = s.data.Chtimes(filepath.Join(s.Path(key), "HEAD"), time.Unix(0, 0))
}

// FollowHead points the HEAD of key's mirror at head, a branch its
// upstream's listing showed as HEAD (a full node's own check of the
// upstream, when the refs it serves are the upstream's): the result's
// Before and After say what HEAD named. A head that names no branch, or a
// branch the mirror does not have, changes nothing.
func (s *Store) FollowHead(ctx context.Context, key repokey.Key, head string) (Result, error) {
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	if ok, err := s.data.exists(key, dir); err != nil || !ok {
		return Result{}, fmt.Errorf("mirror %s: %w", key, errors.Join(err, fs.ErrNotExist))
	}
	before, err := s.git.StoredRefs(ctx, dir)
	if err != nil {
		return Result{}, fmt.Errorf("mirror %s: read refs: %w", key, err)
	}
	res := Result{Before: before, After: before}
	if _, ok := before.Refs[head]; !ok {
		return res, nil
	}
	return s.followHead(ctx, dir, head, res)
}

func (s *Store) setHead(ctx context.Context, dir, head string) error {
	if !strings.HasPrefix(head, "refs/heads/") {
		return nil
	}
	return s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "symbolic-ref", Args: []string{"HEAD", head}})
}

// Refs reads the refs of key's mirror.
func (s *Store) Refs(ctx context.Context, key repokey.Key) (gitcmd.Refs, error) {
	if !s.Has(key) {
		return gitcmd.Refs{}, fmt.Errorf("mirror %s: %w", key, fs.ErrNotExist)
	}
	return s.git.LocalRefs(ctx, s.Path(key))
}

// Remove deletes key's mirror: it is first renamed out of repos/, so that
// it is never seen half-deleted.
// A member of a pool leaves it (its refs are deleted from the pool, which
// is then repacked without what no other member reaches: pool.go). ctx
// bounds the pool's git; a repack it stops is owed, and MaintainPool does
// it.
func (s *Store) Remove(ctx context.Context, key repokey.Key) error {
	network, err := s.remove(ctx, key)
	if err != nil || network == "" {
		return err
	}
	return s.dropPool(ctx, network)
}

func (s *Store) remove(ctx context.Context, key repokey.Key) (string, error) {
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	network := s.networkOf(dir)
	trash := filepath.Join(s.tmp, "rm-"+rand.Text())
	if err := s.data.Rename(dir, trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("mirror %s: remove: %w", key, err)
	}
	s.pruneEmptyParents(filepath.Dir(dir))
	if network != "" {
		unlockPool := s.lock(poolLockKey(network))
		err := s.forget(ctx, network, key)
		unlockPool()
		if err != nil {
			return "", fmt.Errorf("mirror %s: remove: %w", key, err)
		}
	}
	if err := s.data.RemoveAll(trash); err != nil {
		return network, fmt.Errorf("mirror %s: remove: %w", key, err)
	}
	return network, nil
}

func (s *Store) pruneEmptyParents(dir string) {
	for dir != s.root && strings.HasPrefix(dir, s.root) {
		if s.data.Remove(dir) != nil { // not empty, or gone
			return
		}
		dir = filepath.Dir(dir)
	}
}

// Scan lists the keys of every mirror on disk, removes the lock files a
// killed git left in them (nothing else runs git on them yet), hands
// the mirrors marked for pruning to the pruner (prune.go) and, after an
// unclean stop, finds the mirrors written shortly before it (Unchecked). A mirror stored
// under an older spelling of its key is moved to the canonical one.
func (s *Store) Scan() ([]repokey.Key, error) {
	var keys []repokey.Key
	type move struct {
		old   string // the directory, a non-canonical key
		canon repokey.Key
	}
	var moves []move
	written := map[repokey.Key]time.Time{}
	err := filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			s.log.Warn("scan: skip unreadable entry", "path", path, "err", err)
			return nil
		}
		if !d.IsDir() || path == s.root || !strings.HasSuffix(d.Name(), ".git") {
			return nil
		}
		rel, _ := filepath.Rel(s.root, path)
		dir := strings.TrimSuffix(filepath.ToSlash(rel), ".git")
		key, err := repokey.KeyOfDir(dir)
		if err != nil {
			// An older layout: the key written as it is, upper case
			// unescaped, or a spelling that is not canonical.
			if canon, err := (repokey.Folding{}).Canonical(dir); err == nil && (string(canon) != dir || canon.Dir() != dir) {
				moves = append(moves, move{dir, canon})
				return fs.SkipDir
			}
			s.log.Warn("scan: not a repository key, left alone", "path", path)
			return fs.SkipDir
		}
		s.cleanLocks(path)
		s.healLink(key, path)
		s.loadMark(key, path)
		keys = append(keys, key)
		if !s.clean {
			written[key] = lastWrite(path)
		}
		return fs.SkipDir
	})
	if err != nil {
		return nil, fmt.Errorf("mirror: scan %s: %w", s.root, err)
	}
	for _, m := range moves {
		if s.moveToCanonical(m.old, m.canon) {
			s.cleanLocks(s.Path(m.canon))
			s.healLink(m.canon, s.Path(m.canon))
			s.loadMark(m.canon, s.Path(m.canon))
			keys = append(keys, m.canon)
			if !s.clean {
				written[m.canon] = lastWrite(s.Path(m.canon))
			}
		}
	}
	unchecked := recentlyWritten(written)
	s.mu.Lock()
	s.unchecked = unchecked
	s.mu.Unlock()
	if len(unchecked) > 0 {
		s.log.Warn("the last stop was not clean: the mirrors written shortly before it are checked before they are served",
			"mirrors", len(unchecked), "window", RecentWindow)
	}
	return keys, nil
}

// moveToCanonical renames the mirror that an older gitfleet stored under a
// key spelled otherwise (upper case, NFD) to its canonical key, so that an
// upgrade neither clones it again nor leaves it behind. A mirror already
// at the canonical key wins; the other is left alone and logged.
func (s *Store) moveToCanonical(old string, canon repokey.Key) bool {
	from, to := filepath.Join(s.root, filepath.FromSlash(old)+".git"), s.Path(canon)
	if _, err := s.data.Stat(to); err == nil {
		s.log.Warn("scan: a mirror under an older spelling of a key that is already held; left alone", "path", from, "key", canon)
		return false
	}
	if err := s.data.MkdirAll(filepath.Dir(to)); err != nil {
		s.log.Warn("scan: could not move a mirror to its canonical key", "path", from, "key", canon, "err", err)
		return false
	}
	if err := s.data.Rename(from, to); err != nil {
		s.log.Warn("scan: could not move a mirror to its canonical key", "path", from, "key", canon, "err", err)
		return false
	}
	s.pruneEmptyParents(filepath.Dir(from))
	s.log.Info("scan: mirror moved to its canonical key", "from", old, "key", canon)
	return true
}

// cleanLocks removes *.lock files and fetch quarantines in one repository.
func (s *Store) cleanLocks(repo string) {
	// packed-refs.new is the file git writes under packed-refs.lock: left by
	// a killed git, it fails every later pack-refs with "File exists".
	for _, name := range []string{"HEAD.lock", "config.lock", "packed-refs.lock", "packed-refs.new", "shallow.lock", "index.lock"} {
		if s.data.Remove(filepath.Join(repo, name)) == nil {
			s.log.Info("removed stale lock", "path", filepath.Join(repo, name))
		}
	}
	_ = filepath.WalkDir(filepath.Join(repo, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".lock") {
			if s.data.Remove(p) == nil {
				s.log.Info("removed stale lock", "path", p)
			}
		}
		return nil
	})
	if ents, err := os.ReadDir(filepath.Join(repo, "objects")); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "incoming-") || strings.HasPrefix(e.Name(), "tmp_") {
				_ = s.data.RemoveAll(filepath.Join(repo, "objects", e.Name()))
			}
		}
	}
	// What a killed maintenance run (maintain.go) leaves.
	for _, rel := range []string{"objects/info/commit-graph.lock", "objects/info/commit-graphs/commit-graph-chain.lock", maintMarker + ".tmp"} {
		if s.data.Remove(filepath.Join(repo, filepath.FromSlash(rel))) == nil {
			s.log.Info("removed stale lock", "path", filepath.Join(repo, filepath.FromSlash(rel)))
		}
	}
	for _, p := range s.data.removeCutWrites(repo, filepath.Join(repo, "objects", "info")) {
		s.log.Info("removed a marker's write cut short", "path", p)
	}
	if ents, err := os.ReadDir(filepath.Join(repo, "objects", "pack")); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "tmp_") || strings.HasSuffix(e.Name(), ".lock") {
				_ = s.data.Remove(filepath.Join(repo, "objects", "pack", e.Name()))
			}
		}
	}
}
