package mirror

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Fork networks (issue #24): the mirrors of one network share one object
// pool, a bare repository under <data>/pools, named from the network by a
// strict sanitisation and a hash (poolDirName: never a path from the
// name, which comes from the coordinator's catalog).
//
//   - A member borrows the pool's objects through objects/info/alternates
//     (a relative path, so that the data directory can be moved whole:
//     link) and keeps its own refs; what it fetches lands in it first.
//   - The pool fetches each member's refs into refs/virtual/<id>/ (id: a
//     hash of the member's key) after the member's clone and after every
//     fetch that moved them, so it holds every object a member reaches; the
//     member then repacks with -l (local), dropping what the pool holds.
//   - The pool is repacked with delta islands (one island a member, so a
//     clone of one member carries none of another's deltas), a bitmap and a
//     commit graph, which members' clones use (git reads the bitmaps and
//     commit graphs of alternates). extensions.preciousObjects guards it
//     against any git that would prune it; gitfleet's own repack lifts it
//     for its run only, under the pool's lock, and puts it back even when
//     the run is stopped.
//   - A member keeps no commit graph (nor bitmap) of its own: it reads its
//     pool's. One of its own would name the commits its refs reached when
//     it was written, which it holds only through the pool; once its refs
//     moved on, a drop lets them go, and every git that reads the graph
//     (git fsck first) would find the member broken. JoinNetwork removes
//     the one a standalone mirror had, a member's maintenance writes none,
//     and a drop removes any left (by an earlier gitfleet) before it lets
//     objects go. The pool writes its own graph before its repack, so that
//     it never names a commit the repack just dropped.
//   - The pool is never served: it is outside repos/, and its refs are
//     nobody's. A member serves what its own refs reach (gitserve's wants
//     check walks the member's refs alone).
//   - A member leaves (LeaveNetwork, Remove, Retire) by repacking without
//     -l, taking every object its refs reach from the pool, before its
//     alternates link is cut; its virtual refs go afterwards, and the pool
//     is repacked dropping what no member reaches (dropPool) only with every
//     member's lock held and every member's refs fetched anew: a member's
//     fetch that found an unreachable object in the pool (git takes any
//     object it has as had) and pointed a ref at it is then either finished
//     and counted, or waits. A clone or first pull that borrows the pool
//     is enlisted as a member before it fetches (enlist), for the same
//     reason.
//
// Lock order: a member's lock before its pool's; members in key order.

const (
	poolsDir      = "pools"
	networkFile   = "gitfleet-network"  // in a member and in a pool: the network's name
	membersDir    = "gitfleet-members"  // in a pool: one file a member, named by its id, holding its key
	poolDropFile  = "gitfleet-drop-due" // in a pool: a member left; dropPool is owed
	poolIslandRef = "refs/virtual/"     // the members' refs in a pool
	islandRegex   = "refs/virtual/([0-9a-f]+)/"

	// poolCoreRef, in a pool, is the history every member's default
	// branch shares (setPoolCore); it alone makes the island named
	// poolCoreIsland (not hex: never a member's), which the pool's repack
	// packs first (pack.islandCore).
	poolCoreRef         = "refs/gitfleet/core"
	poolCoreIsland      = "core"
	poolCoreIslandRegex = "^refs/gitfleet/(core)$"
)

// poolDirName names the pool of network on disk: at most 40 characters of
// [a-z0-9_-] from the name (for people reading the directory) and 16 hex
// digits of its SHA-256 (for uniqueness).
func poolDirName(network string) string {
	sum := sha256.Sum256([]byte(network))
	var b strings.Builder
	for _, r := range strings.ToLower(network) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String() + "-" + hex.EncodeToString(sum[:8]) + ".git"
}

// memberID names key in a pool's refs: hex, as the island regex wants.
func memberID(key repokey.Key) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:10])
}

// PoolPath is the directory of network's pool.
func (s *Store) PoolPath(network string) string {
	return filepath.Join(filepath.Dir(s.root), poolsDir, poolDirName(network))
}

func poolLockKey(network string) string { return "\x00pool\x00" + network }

// Network is the network key's mirror belongs to ("" for a standalone
// mirror or none).
func (s *Store) Network(key repokey.Key) string {
	return s.networkOf(s.Path(key))
}

func (s *Store) networkOf(dir string) string {
	b, err := s.data.ReadFile(filepath.Join(dir, networkFile))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// ensurePool makes network's pool if there is none, under the pool's lock
// (held by the caller), and returns its directory.
func (s *Store) ensurePool(ctx context.Context, network string) (string, error) {
	dir := s.PoolPath(network)
	if fi, err := s.data.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(s.tmp, "pool-")
	if err != nil {
		return "", fmt.Errorf("pool %q: %w", network, err)
	}
	defer s.data.RemoveAll(tmp)
	if err := s.git.Run(ctx, gitcmd.Cmd{Name: "init", Flags: []string{"--bare", "--quiet", "--template="}, Args: []string{tmp}}); err != nil {
		return "", fmt.Errorf("pool %q: init: %w", network, err)
	}
	for _, kv := range [][2]string{
		{"core.repositoryFormatVersion", "1"},
		{"extensions.preciousObjects", "true"},
		{"repack.useDeltaIslands", "true"},
		{"pack.island", islandRegex},
		{"gc.auto", "0"},
	} {
		if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: tmp, Name: "config", Args: kv[:]}); err != nil {
			return "", fmt.Errorf("pool %q: config %s: %w", network, kv[0], err)
		}
	}
	if err := s.data.WriteFile(filepath.Join(tmp, networkFile), []byte(network+"\n")); err != nil {
		return "", fmt.Errorf("pool %q: %w", network, err)
	}
	if err := s.data.MkdirAll(filepath.Join(tmp, membersDir)); err != nil {
		return "", fmt.Errorf("pool %q: %w", network, err)
	}
	if err := s.data.MkdirAll(filepath.Dir(dir)); err != nil {
		return "", fmt.Errorf("pool %q: %w", network, err)
	}
	if err := s.data.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("pool %q: move into place: %w", network, err)
	}
	s.log.Info("object pool made", "network", network, "dir", filepath.Base(dir))
	return dir, nil
}

// borrowPool makes the new repository at dir (a clone or a first pull of
// key, not in place yet) borrow network's pool, made if needed, before it
// fetches: key is enlisted, dir linked (from where it is: placeLink links
// it from its place before it is moved there) and marked as a member of
// network, so that it is one once it is moved into place. It returns the
// pool.
func (s *Store) borrowPool(ctx context.Context, key repokey.Key, dir, network string) (string, error) {
	unlockPool := s.lock(poolLockKey(network))
	pool, err := s.ensurePool(ctx, network)
	if err == nil {
		err = s.enlist(pool, key) // before the fetch: see enlist
	}
	unlockPool()
	if err != nil {
		return "", err
	}
	if err := s.link(dir, dir, pool); err != nil {
		return "", fmt.Errorf("link to the pool: %w", err)
	}
	if err := s.data.WriteFile(filepath.Join(dir, networkFile), []byte(network+"\n")); err != nil {
		return "", err
	}
	return pool, nil
}

// link points the repository at dir to pool's objects, as seen from place:
// dir itself, or where dir is about to be renamed to (see placeLink).
//
// The link is relative (git reads a relative alternate against the
// objects directory that holds the file, lexically): the data directory
// can then be moved whole, to another disk or mount point, and every
// member still finds its pool. An absolute link would name the old place.
func (s *Store) link(dir, place, pool string) error {
	rel, err := filepath.Rel(filepath.Join(place, "objects"), filepath.Join(pool, "objects"))
	if err != nil {
		return err
	}
	info := filepath.Join(dir, "objects", "info")
	if err := s.data.MkdirAll(info); err != nil {
		return err
	}
	return s.data.WriteFile(filepath.Join(info, "alternates"), []byte(rel+"\n"))
}

// placeLink rewrites the link of the new member at tmp (borrowPool's, which
// is relative to tmp) for dst, where tmp is renamed next: no git runs in
// tmp in between, and the member appears at dst already linked right.
func (s *Store) placeLink(key repokey.Key, tmp, dst, pool string) error {
	if err := s.link(tmp, dst, pool); err != nil {
		return fmt.Errorf("mirror %s: link to the pool from its place: %w", key, err)
	}
	return nil
}

// healLink rewrites the link of the mirror key at dir to its network's pool
// when it is not the one link writes: an earlier gitfleet wrote it
// absolute, which names a place the data directory may have left (every
// member would then miss most of its objects, and be copied again as
// corrupt), or the mirror was moved to another place in the data
// directory (moveToCanonical). A mirror with no link costs one failed
// open: Scan, which visits every mirror before any is served, calls it.
func (s *Store) healLink(key repokey.Key, dir string) {
	// Read directly, not through the data directory's root (a walk of
	// every component, 8x the cost, on every mirror): nothing is
	// written on what it says, and the rewrite goes through the root.
	b, err := os.ReadFile(filepath.Join(dir, "objects", "info", "alternates"))
	if err != nil {
		return // standalone
	}
	network := s.networkOf(dir)
	if network == "" {
		return // not ours to rewrite: verification tells whether it is whole
	}
	pool := s.PoolPath(network)
	was := strings.TrimSpace(string(b))
	if want, err := filepath.Rel(filepath.Join(dir, "objects"), filepath.Join(pool, "objects")); err != nil || was == want {
		return
	}
	if _, err := s.data.Stat(filepath.Join(pool, "objects")); err != nil {
		s.log.Warn("a member's pool is not there: its link is left as it is", "key", key, "network", network, "err", err)
		return
	}
	if err := s.link(dir, dir, pool); err != nil {
		s.log.Warn("could not rewrite a member's link to its pool", "key", key, "network", network, "err", err)
		return
	}
	s.log.Info("member's link to its pool rewritten relative", "key", key, "network", network, "was", was)
}

// linked tells whether the repository at dir borrows from a pool.
func linked(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "objects", "info", "alternates"))
	return err == nil
}

// absorb fetches the refs of the member at dir into pool's
// refs/virtual/<id>/ (the objects the pool lacks come with them) and
// records the member. The caller holds the member's and the pool's locks.
func (s *Store) absorb(ctx context.Context, pool string, key repokey.Key, dir string) error {
	id := memberID(key)
	c := gitcmd.Cmd{GitDir: pool, Name: "fetch",
		// Each fetch one pack (no loose objects to sweep); no fsck: the
		// member's objects were checked when they came in.
		Config: []string{"fetch.unpackLimit=1"},
		Flags:  []string{"--no-write-fetch-head", "--no-tags", "--quiet", "--no-auto-gc", "--prune"},
		Args:   []string{dir, "+refs/*:" + poolIslandRef + id + "/*"}}
	if err := s.git.Local().Run(ctx, c); err != nil {
		return fmt.Errorf("pool %s: fetch the refs of %s: %w", filepath.Base(pool), key, err)
	}
	return s.enlist(pool, key)
}

// enlist records key as a member of pool. A clone or a first pull that
// borrows the pool is enlisted before its fetch, so that a drop (dropPool)
// waits for its lock and counts its refs: its fetch may have taken as had
// an object of the pool that no member's refs reached any more, and the
// drop must not let that object go. The caller holds the pool's lock.
func (s *Store) enlist(pool string, key repokey.Key) error {
	return s.data.WriteFile(filepath.Join(pool, membersDir, memberID(key)), []byte(key+"\n"))
}

// dedup drops from the member at dir the objects its pool holds.
func (s *Store) dedup(ctx context.Context, dir string) error {
	if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "repack",
		Flags: []string{"-a", "-d", "-l", "-n", "-q", maintThreads}}); err != nil {
		return fmt.Errorf("repack against the pool: %w", err)
	}
	return nil
}

// JoinNetwork makes key's mirror a member of network: its refs are fetched
// into the pool (made if needed), it is linked to the pool, and what the
// pool holds is dropped from it. A member of another network leaves it
// first; network "" makes it standalone (LeaveNetwork). A mirror that is
// not there is not an error: its clone joins (SyncIn).
func (s *Store) JoinNetwork(ctx context.Context, key repokey.Key, network string) error {
	if cur := s.Network(key); cur == network {
		return nil
	} else if cur != "" {
		if err := s.LeaveNetwork(ctx, key); err != nil {
			return err
		}
	}
	if network == "" {
		return nil
	}
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	if ok, err := s.data.exists(key, dir); err != nil || !ok {
		return err
	}
	unlockPool := s.lock(poolLockKey(network))
	defer unlockPool()
	pool, err := s.ensurePool(ctx, network)
	if err != nil {
		return err
	}
	if err := s.absorb(ctx, pool, key, dir); err != nil {
		return fmt.Errorf("mirror %s: join network %q: %w", key, network, err)
	}
	if err := s.link(dir, dir, pool); err != nil {
		return fmt.Errorf("mirror %s: join network %q: %w", key, network, err)
	}
	if err := s.data.WriteFile(filepath.Join(dir, networkFile), []byte(network+"\n")); err != nil {
		return fmt.Errorf("mirror %s: join network %q: %w", key, network, err)
	}
	// The old multi-pack index and bitmap describe packs that dedup
	// rewrites, and the old commit graph commits the member will hold
	// only through the pool: a member has none of them (it uses the
	// pool's).
	s.dropMidx(dir)
	if err := s.dropCommitGraph(dir); err != nil {
		return fmt.Errorf("mirror %s: join network %q: %w", key, network, err)
	}
	if err := s.dedup(ctx, dir); err != nil {
		return fmt.Errorf("mirror %s: join network %q: %w", key, network, err)
	}
	s.log.Info("mirror joined its network's pool", "key", key, "network", network)
	return nil
}

// dropMidx removes a multi-pack index and its bitmap (a standalone
// mirror's maintenance writes them; git 2.39 cannot write one over packs
// whose objects lie partly in an alternate).
func (s *Store) dropMidx(dir string) {
	pack := filepath.Join(dir, "objects", "pack")
	ents, _ := os.ReadDir(pack)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "multi-pack-index") {
			_ = s.data.Remove(filepath.Join(pack, e.Name()))
		}
	}
}

// dropCommitGraph removes the commit graph of the member at dir, a single
// file or a chain (see the comment at the top of this file). The chain
// file goes first: without it git reads none of its layers.
func (s *Store) dropCommitGraph(dir string) error {
	info := filepath.Join(dir, "objects", "info")
	chain := filepath.Join(info, "commit-graphs", "commit-graph-chain")
	for _, p := range []string{chain, filepath.Join(info, "commit-graph")} {
		if err := s.data.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the commit graph: %w", err)
		}
	}
	if err := s.data.RemoveAll(filepath.Join(info, "commit-graphs")); err != nil {
		return fmt.Errorf("remove the commit graph: %w", err)
	}
	return nil
}

// LeaveNetwork makes key's mirror standalone: it repacks taking every
// object its refs reach from the pool, its link is cut, its refs leave the
// pool, and the pool is repacked without what no member reaches any more
// (dropPool). The other members are untouched.
func (s *Store) LeaveNetwork(ctx context.Context, key repokey.Key) error {
	network, err := s.leave(ctx, key)
	if err != nil || network == "" {
		return err
	}
	return s.dropPool(ctx, network)
}

// leave is LeaveNetwork up to the pool's repack, whose network it returns
// ("" when the mirror was no member).
func (s *Store) leave(ctx context.Context, key repokey.Key) (string, error) {
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	network := s.networkOf(dir)
	if network == "" {
		return "", nil
	}
	unlockPool := s.lock(poolLockKey(network))
	defer unlockPool()
	if linked(dir) {
		// Without -l: the objects the refs reach in the pool are copied in.
		if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "repack",
			Flags: []string{"-a", "-d", "-n", "-q", maintThreads}}); err != nil {
			return "", fmt.Errorf("mirror %s: leave network %q: repack with the pool's objects: %w", key, network, err)
		}
		if err := s.data.Remove(filepath.Join(dir, "objects", "info", "alternates")); err != nil {
			return "", fmt.Errorf("mirror %s: leave network %q: %w", key, network, err)
		}
		if s.testHookCut != nil {
			s.testHookCut(key)
		}
		if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "rev-list", Flags: []string{"--objects", "--all", "--quiet"}}); err != nil {
			// Put the link back: the mirror stays whole as a member.
			if lerr := s.link(dir, dir, s.PoolPath(network)); lerr != nil {
				s.log.Error("mirror cut from its pool and not linked back: it misses the pool's objects until repaired", "key", key, "network", network, "err", lerr)
			}
			if ctx.Err() != nil {
				// Stopped, not found broken: it stays a member.
				return "", fmt.Errorf("mirror %s: leave network %q: check it whole without the pool: %w", key, network, err)
			}
			return "", fmt.Errorf("mirror %s: leave network %q: %w: not whole without the pool: %w", key, network, ErrCorrupt, err)
		}
	}
	if err := s.data.Remove(filepath.Join(dir, networkFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("mirror %s: leave network %q: %w", key, network, err)
	}
	if err := s.forget(ctx, network, key); err != nil {
		return "", err
	}
	// Standalone again: a full maintenance run gives it its bitmap.
	if _, err := s.maintain(ctx, dir, true); err != nil {
		s.log.Warn("maintenance of a mirror that left its network failed; the next run makes its bitmap", "key", key, "err", err)
	}
	s.log.Info("mirror left its network's pool", "key", key, "network", network)
	return network, nil
}

// forget deletes key's refs from network's pool and marks the pool for a
// repack that drops what no member reaches. The caller holds the pool's
// lock.
func (s *Store) forget(ctx context.Context, network string, key repokey.Key) error {
	pool := s.PoolPath(network)
	if _, err := s.data.Stat(pool); err != nil {
		return nil
	}
	id := memberID(key)
	out, err := s.git.Output(ctx, gitcmd.Cmd{GitDir: pool, Name: "for-each-ref",
		Flags: []string{"--format=%(refname)"}, Args: []string{poolIslandRef + id + "/"}})
	if err != nil {
		return fmt.Errorf("pool %q: list the refs of %s: %w", network, key, err)
	}
	var del strings.Builder
	for _, ref := range strings.Fields(string(out)) {
		del.WriteString("delete " + ref + "\n")
	}
	if del.Len() > 0 {
		if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: pool, Name: "update-ref", Flags: []string{"--stdin"},
			Stdin: strings.NewReader(del.String())}); err != nil {
			return fmt.Errorf("pool %q: delete the refs of %s: %w", network, key, err)
		}
	}
	if err := s.data.Remove(filepath.Join(pool, membersDir, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pool %q: %w", network, err)
	}
	return s.data.WriteFile(filepath.Join(pool, poolDropFile), []byte(key+"\n"))
}

// poolMembers lists the keys of network's members, sorted.
func (s *Store) poolMembers(network string) []repokey.Key {
	dir := filepath.Join(s.PoolPath(network), membersDir)
	ents, _ := os.ReadDir(dir)
	var keys []repokey.Key
	for _, e := range ents {
		b, err := s.data.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		// A file on disk: the key is parsed, as any from outside.
		if key, err := repokey.Parse(strings.TrimSpace(string(b))); err == nil && memberID(key) == e.Name() {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// dropPool repacks network's pool dropping what no member reaches, when a
// member left since the last one; a pool with no members left is deleted.
// Every member's lock is held throughout and every member's refs are
// fetched anew first (see the comment at the top of this file).
func (s *Store) dropPool(ctx context.Context, network string) error {
	pool := s.PoolPath(network)
	if _, err := s.data.Stat(filepath.Join(pool, poolDropFile)); err != nil {
		return nil
	}
	locked := s.poolMembers(network)
	for _, m := range locked {
		defer s.Lock(m)()
	}
	defer s.lock(poolLockKey(network))()
	// Another member's leave may have dropped (or removed) the pool while
	// this one waited for the locks: the last members leaving at once.
	if _, err := s.data.Stat(filepath.Join(pool, poolDropFile)); err != nil {
		return nil
	}
	members := s.poolMembers(network) // as they are now, under the locks
	for _, m := range members {
		if !slices.Contains(locked, m) {
			// Enlisted since: its clone may be under way, and its lock is
			// not held. The drop waits for the next maintenance run.
			s.log.Debug("pool drop put off: a member joined meanwhile", "network", network)
			return nil
		}
	}
	var kept []repokey.Key
	for _, m := range members {
		dir := s.Path(m)
		if s.networkOf(dir) != network {
			// Enlisted by a clone or a first pull that failed (its lock
			// is held here: none is under way), or left without being
			// forgotten: no member.
			if err := s.forget(ctx, network, m); err != nil {
				return err
			}
			continue
		}
		kept = append(kept, m)
	}
	if len(kept) == 0 {
		trash := filepath.Join(s.tmp, "rm-"+rand.Text())
		if err := s.data.Rename(pool, trash); err != nil {
			return fmt.Errorf("pool %q: remove: %w", network, err)
		}
		s.log.Info("object pool removed: no member left", "network", network)
		return s.data.RemoveAll(trash)
	}
	for _, m := range kept {
		if err := s.absorb(ctx, pool, m, s.Path(m)); err != nil {
			return err
		}
		// One an earlier gitfleet wrote may name what the drop lets go.
		if err := s.dropCommitGraph(s.Path(m)); err != nil {
			return fmt.Errorf("mirror %s: %w", m, err)
		}
	}
	if err := s.repackPool(ctx, network, pool, true); err != nil {
		return fmt.Errorf("pool %q: %w", network, err)
	}
	return s.data.Remove(filepath.Join(pool, poolDropFile))
}

// repackPool repacks network's pool at dir whole, with delta islands, a
// bitmap and a commit graph; with drop, what no member's refs reach is
// dropped, otherwise it is kept (-k). The caller holds the pool's lock
// (and, to drop, every member's).
//
// The commit graph is written first, of what the refs reach: the repack
// keeps all of it, so the graph never names a commit that is gone, as the
// old graph would between a drop and a graph written after it (the
// members read the pool's graph without its lock). The bitmap's walk then
// reads commits from it, too.
//
// The history the members share is written first (pack.islandCore over
// poolCoreRef): a clone of a member then reuses that part of the pack as
// it is, one copy, as a standalone mirror's clone reuses its whole pack.
// Without it the members' own newest commits, which each other member
// lacks, lead the pack, and git (2.39) reuses verbatim only the leading
// run of objects a clone wants: every object of a member's clone went
// through the reuse of single objects, 1.4-1.6x a standalone mirror's CPU
// (BenchmarkNetwork, cpu-member/standalone).
func (s *Store) repackPool(ctx context.Context, network, dir string, drop bool) (err error) {
	setPrecious := func(ctx context.Context, v string) error {
		return s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "config", Args: []string{"extensions.preciousObjects", v}})
	}
	if err := setPrecious(ctx, "false"); err != nil {
		return fmt.Errorf("lift preciousObjects: %w", err)
	}
	defer func() {
		// Put back even when the run was stopped (ctx cancelled).
		if perr := setPrecious(context.WithoutCancel(ctx), "true"); perr != nil && err == nil {
			err = fmt.Errorf("restore preciousObjects: %w", perr)
		}
	}()
	if err := s.setPoolCore(ctx, network, dir); err != nil {
		return err
	}
	if err := writeCommitGraph(ctx, s.git, dir, true); err != nil {
		return err
	}
	s.data.removeKeeps(filepath.Join(dir, "objects", "pack"))
	flags := []string{"-a", "-d", "-b", "-i", "-n", "-q", maintThreads}
	if !drop {
		flags = append(flags, "--keep-unreachable")
	}
	if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "repack", Flags: flags,
		Config: []string{"pack.island=" + poolCoreIslandRegex, "pack.islandCore=" + poolCoreIsland}}); err != nil {
		return fmt.Errorf("repack: %w", err)
	}
	if drop && s.testHookDropped != nil {
		s.testHookDropped(network)
	}
	if drop && hasLoose(filepath.Join(dir, "objects")) {
		if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "prune", Flags: []string{"--expire=now"}}); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
	}
	return nil
}

// setPoolCore points the pool at dir's poolCoreRef at the merge base of
// its members' default branches (what each member's HEAD names, as fetched
// into refs/virtual/<id>/), or deletes it when they have none. Every
// object it reaches is one every member reaches: it keeps nothing alive
// that a drop would let go of. The caller holds the pool's lock.
func (s *Store) setPoolCore(ctx context.Context, network, dir string) error {
	var heads []string
	for _, key := range s.poolMembers(network) {
		head, err := s.data.ReadFile(filepath.Join(s.Path(key), "HEAD"))
		if err != nil {
			continue // gone meanwhile: its refs do not count
		}
		if branch, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: refs/"); ok {
			heads = append(heads, poolIslandRef+memberID(key)+"/"+branch)
		}
	}
	var base string
	if len(heads) > 0 {
		out, err := s.git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "for-each-ref",
			Flags: []string{"--format=%(objectname)"}, Args: heads})
		if err != nil {
			return fmt.Errorf("list the members' default branches: %w", err)
		}
		if tips := strings.Fields(string(out)); len(tips) > 0 {
			// Exit code 1 and no output: no common ancestor, no core.
			out, err := s.git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "merge-base", Flags: []string{"--octopus"}, Args: tips})
			var ge *gitcmd.Error
			if err != nil && !(errors.As(err, &ge) && ge.ExitCode == 1) {
				return fmt.Errorf("merge base of the members' default branches: %w", err)
			}
			if f := strings.Fields(string(out)); len(f) > 0 {
				base = f[0]
			}
		}
	}
	c := gitcmd.Cmd{GitDir: dir, Name: "update-ref", Flags: []string{"-d"}, Args: []string{poolCoreRef}}
	if base != "" {
		c = gitcmd.Cmd{GitDir: dir, Name: "update-ref", Args: []string{poolCoreRef, base}}
	}
	if err := s.git.Run(ctx, c); err != nil {
		return fmt.Errorf("set %s: %w", poolCoreRef, err)
	}
	return nil
}

// MaintainPool repacks network's pool when fetches added packs to it since
// its last repack (or drops what no member reaches, when a member left).
func (s *Store) MaintainPool(ctx context.Context, network string) error {
	if err := s.dropPool(ctx, network); err != nil {
		return err
	}
	defer s.lock(poolLockKey(network))()
	dir := s.PoolPath(network)
	sh, err := probe(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if sh.Packs <= 1 && sh.Loose == 0 && sh.Bitmap {
		return nil
	}
	if err := s.repackPool(ctx, network, dir, false); err != nil {
		return fmt.Errorf("pool %q: %w", network, err)
	}
	return nil
}

// VerifyPool checks network's pool as Verify checks a mirror.
func (s *Store) VerifyPool(ctx context.Context, network string) error {
	defer s.lock(poolLockKey(network))()
	return s.verifyDir(ctx, "pool "+network, s.PoolPath(network))
}

// share fetches the member at dir's refs into its pool and drops from it
// what the pool then holds. The caller holds the member's lock.
func (s *Store) share(ctx context.Context, key repokey.Key, dir, network string) error {
	defer s.lock(poolLockKey(network))()
	pool := s.PoolPath(network)
	if err := s.absorb(ctx, pool, key, dir); err != nil {
		return err
	}
	return s.dedup(ctx, dir)
}

// repairPool checks network's pool and, when it is broken, puts a new,
// empty one in its place: the member being repaired is then cloned into
// it from its upstream, and every other member, which now misses what the
// broken pool held, is named by Suspects, to be verified (and repaired)
// before it is served again.
func (s *Store) repairPool(ctx context.Context, network string) error {
	defer s.lock(poolLockKey(network))()
	pool := s.PoolPath(network)
	if _, err := s.data.Stat(pool); err != nil {
		return nil
	}
	err := s.verifyDir(ctx, "pool "+network, pool)
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrCorrupt) {
		return err
	}
	members := s.poolMembers(network)
	trash := filepath.Join(s.tmp, "rm-"+rand.Text())
	if err := s.data.Rename(pool, trash); err != nil {
		return fmt.Errorf("pool %q: move the broken pool aside: %w", network, err)
	}
	s.mu.Lock()
	if s.suspects == nil {
		s.suspects = map[repokey.Key]bool{}
	}
	for _, m := range members {
		s.suspects[m] = true
	}
	s.mu.Unlock()
	s.log.Warn("object pool is corrupt: made anew; its members are verified before they are served", "network", network,
		"members", len(members), "err", err)
	_ = s.data.RemoveAll(trash)
	_, err = s.ensurePool(ctx, network)
	return err
}

// Suspects returns, and forgets, the mirrors whose pool was found broken
// and made anew (repairPool): they miss objects until they are repaired,
// and must be verified before they are served again.
func (s *Store) Suspects() []repokey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]repokey.Key, 0, len(s.suspects))
	for k := range s.suspects {
		keys = append(keys, k)
	}
	s.suspects = nil
	slices.Sort(keys)
	return keys
}
