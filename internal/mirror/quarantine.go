package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// UpstreamRefs lists the named refs of a repository's upstream (every
// branch and tag when names is nil), with HEAD's symref when it has one.
type UpstreamRefs func(ctx context.Context, names []string) (gitcmd.Refs, error)

// Source is where a verified pull fetches from: a URL and the environment
// git needs to reach it (credentials of a local proxy, kept off the
// command line).
type Source struct {
	URL string
	Env []string
}

// emptyPullSource names verified pulls as the source of an empty
// advertisement: their refs are the upstream's.
const emptyPullSource = "verified pull"

// PullVerified brings key's mirror to what src serves, but only as far as
// the upstream confirms it. The objects are fetched (and checked, with
// transfer.fsckObjects) into a quarantine repository under <data>/tmp that
// borrows the mirror's objects, so that only new objects come over. The refs
// the pull would change are then asked of the upstream; when it shows every
// change (a new or moved ref at the same object, a deleted ref absent), the
// objects move into the mirror and the changes are applied in one
// update-ref transaction, each old value checked. Otherwise nothing is
// applied and the error is a *MismatchError. The quarantine is deleted in
// every case. A first pull (no mirror yet) asks the upstream for all its
// branches and tags, which the source must serve exactly. The fetch is
// bounded by MaxRepoSize as a fetch from an upstream is: a source that
// serves more is stopped while its pack streams in, and the error wraps
// ErrPullTooLarge.
func (s *Store) PullVerified(ctx context.Context, key repokey.Key, src Source, upstream UpstreamRefs) (Result, error) {
	return s.PullVerifiedIn(ctx, key, "", src, upstream)
}

// PullVerifiedIn is PullVerified for a member of network's object pool
// ("": a standalone mirror; see pool.go), as SyncIn is Sync: a mirror of
// another network (or none) changes pools first (JoinNetwork), and the
// quarantine borrows the pool's objects, so that the source is sent only
// what the member alone has (the pool's tips are haves in the
// negotiation). A first pull's quarantine borrows the pool directly; a
// later one borrows the member, which borrows the pool. Nothing the pull
// brought enters the pool before it is verified and applied: it is then
// shared with the pool at once, so the next member to be pulled has it.
func (s *Store) PullVerifiedIn(ctx context.Context, key repokey.Key, network string, src Source, upstream UpstreamRefs) (Result, error) {
	if s.Has(key) && s.Network(key) != network {
		if err := s.JoinNetwork(ctx, key, network); err != nil {
			return Result{}, err
		}
	}
	unlock := s.Lock(key)
	defer unlock()
	dir := s.Path(key)
	ok, err := s.data.exists(key, dir)
	if err != nil {
		return Result{}, err
	}
	first := !ok
	var before gitcmd.Refs
	if !first {
		var err error
		if before, err = s.git.StoredRefs(ctx, dir); err != nil {
			return Result{}, fmt.Errorf("mirror %s: read refs: %w", key, err)
		}
	}
	res := Result{Before: before, After: before}
	q, err := s.quarantine(ctx, key, dir, first, network)
	if err != nil {
		return res, err
	}
	defer s.data.RemoveAll(q)
	if err := s.fetchQuarantine(ctx, key, dir, q, src, first); err != nil { // pullsize.go
		return res, err
	}
	served, err := s.git.StoredRefs(ctx, q)
	if err != nil {
		return res, fmt.Errorf("mirror %s: read quarantine refs: %w", key, err)
	}
	cs := changes(before.Refs, served.Refs)
	if len(cs) == 0 && !first {
		return res, nil
	}
	names := upstreamQuery(cs, first)
	up, err := upstream(ctx, names)
	if err != nil {
		return res, fmt.Errorf("mirror %s: ask the upstream: %w", key, err)
	}
	if bad := verify(cs, up.Refs, first, served.Refs); len(bad) > 0 {
		return res, &MismatchError{Key: key.String(), Mismatches: bad}
	}
	next := applied(before, cs, "")
	if !first {
		// A source that empties the mirror is believed, verified or not,
		// only as the upstream's own listing is (emptyguard.go).
		confirmed, err := s.empty.admit(key, emptyPullSource, before, next, s.now())
		if err != nil {
			return res, fmt.Errorf("mirror %s: %w", key, err)
		}
		if confirmed {
			if err := s.writeTombstones(ctx, key, dir, before.Refs); err != nil {
				return res, err
			}
		}
	}
	res.Fetched, res.Changed = true, len(cs) > 0
	if first {
		if err := s.setHead(ctx, q, up.Head); err != nil {
			return res, err
		}
		if err := s.data.MkdirAll(filepath.Dir(dir)); err != nil {
			return res, fmt.Errorf("mirror %s: %w", key, err)
		}
		if network != "" {
			if err := s.placeLink(key, q, dir, s.PoolPath(network)); err != nil {
				return res, err
			}
		}
		if err := s.data.Rename(q, dir); err != nil {
			return res, fmt.Errorf("mirror %s: move first pull into place: %w", key, err)
		}
		res.Cloned = true
		s.sharePulled(ctx, key, dir, network)
	} else {
		if err := s.data.promoteObjects(filepath.Join(q, "objects"), filepath.Join(dir, "objects")); err != nil {
			return res, fmt.Errorf("mirror %s: %w", key, err)
		}
		ahead := s.markAhead(key, dir, before.Refs, next.Refs)
		script := updateRefScript(cs)
		// The tips the changes take away are kept in the same transaction
		// (archive.go): their objects are in the mirror now, so what is
		// a fast-forward is known before it.
		archive := s.archiving(key)
		var gone []RefChange
		var why string
		if archive {
			gone, why = s.dropped(ctx, dir, before, next)
			arch, err := s.archivePull(ctx, key, dir, gone)
			if err != nil {
				s.settleFailed(ctx, key, dir, before, ahead)
				return res, err
			}
			script = arch + script
		}
		if err := s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "update-ref", Flags: []string{"--stdin"},
			Stdin: strings.NewReader(script)}); err != nil {
			s.settleFailed(ctx, key, dir, before, ahead)
			return res, fmt.Errorf("mirror %s: apply verified refs: %w", key, err)
		}
		if archive {
			res.Dropped = s.markGone(key, dir, gone, why, ahead)
		} else {
			res.Dropped = s.markIfDropped(ctx, key, dir, before, next, ahead)
		}
		if res.Changed {
			s.sharePulled(ctx, key, dir, network)
		}
		if up.Head != "" && up.Head != before.Head {
			if err := s.setHead(ctx, dir, up.Head); err != nil {
				return res, err
			}
		}
	}
	res.After = applied(before, cs, up.Head)
	return res, nil
}

// applied is what refs become once cs and HEAD's new target are applied
// (without the committer times that only LocalRefs reads): the mirror's
// refs after a verified pull, without reading them back.
func applied(before gitcmd.Refs, cs []RefChange, head string) gitcmd.Refs {
	after := gitcmd.Refs{Refs: make(map[string]string, len(before.Refs)+len(cs)), Head: before.Head}
	maps.Copy(after.Refs, before.Refs)
	for _, c := range cs {
		if c.New == "" {
			delete(after.Refs, c.Ref)
		} else {
			after.Refs[c.Ref] = c.New
		}
	}
	if strings.HasPrefix(head, "refs/heads/") { // as setHead
		after.Head = head
	}
	return after
}

// sharePulled shares what a verified pull applied to the member at dir
// with network's pool ("": none). The mirror is whole without it (its
// objects are its own or the pool's): a failure leaves the pool to catch
// up at the next change. The caller holds the member's lock.
func (s *Store) sharePulled(ctx context.Context, key repokey.Key, dir, network string) {
	if network == "" {
		return
	}
	if err := s.share(ctx, key, dir, network); err != nil {
		s.log.Warn("could not add a pulled member's new objects to its pool; the next change will", "key", key, "network", network, "err", err)
	}
}

// quarantine creates an empty bare repository in tmp; unless first, its
// objects/info/alternates points at the mirror's objects (and through
// them at its pool's, for a member). A first pull of a member of network
// points at the pool (made if needed) and is marked as the member, so
// that it is one once it is moved into place.
func (s *Store) quarantine(ctx context.Context, key repokey.Key, dir string, first bool, network string) (string, error) {
	q, err := os.MkdirTemp(s.tmp, "quarantine-")
	if err != nil {
		return "", fmt.Errorf("mirror %s: %w", key, err)
	}
	if err := s.git.Run(ctx, gitcmd.Cmd{Name: "init", Flags: []string{"--bare", "--quiet", "--template="}, Args: []string{q}}); err != nil {
		os.RemoveAll(q)
		return "", err
	}
	if first && network != "" {
		if _, err := s.borrowPool(ctx, key, q, network); err != nil {
			os.RemoveAll(q)
			return "", fmt.Errorf("mirror %s: quarantine in network %q: %w", key, network, err)
		}
	}
	if !first {
		objects, err := filepath.Abs(filepath.Join(dir, "objects"))
		if err == nil {
			err = os.MkdirAll(filepath.Join(q, "objects", "info"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(q, "objects", "info", "alternates"), []byte(objects+"\n"), 0o644)
		}
		if err != nil {
			os.RemoveAll(q)
			return "", fmt.Errorf("mirror %s: quarantine: %w", key, err)
		}
	}
	return q, nil
}

// promoteObjects moves the loose objects and packs of the quarantine's
// object directory src into dst as git's own quarantine does: loose objects
// first, then each pack's data (.pack, .rev, .bitmap) before its .idx, which
// is what makes a pack visible. An object already in dst is left as it is.
func (d dataDir) promoteObjects(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("promote objects: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || len(e.Name()) != 2 {
			continue // info/, pack/ and stray files
		}
		if err := d.moveFiles(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), nil); err != nil {
			return err
		}
	}
	return d.moveFiles(filepath.Join(src, "pack"), filepath.Join(dst, "pack"), func(name string) int {
		switch {
		case strings.HasSuffix(name, ".idx"):
			return 2
		case strings.HasSuffix(name, ".keep"), strings.HasSuffix(name, ".promisor"):
			return -1 // not carried over
		}
		return 1
	})
}

// moveFiles renames the files of src into dst in the order that rank gives
// (lowest first; a negative rank skips the file).
func (d dataDir) moveFiles(src, dst string, rank func(string) int) error {
	ents, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("promote objects: %w", err)
	}
	if rank == nil {
		rank = func(string) int { return 0 }
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && rank(e.Name()) >= 0 && !strings.HasPrefix(e.Name(), "tmp_") {
			names = append(names, e.Name())
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return rank(names[i]) < rank(names[j]) })
	if len(names) == 0 {
		return nil
	}
	if err := d.MkdirAll(dst); err != nil {
		return fmt.Errorf("promote objects: %w", err)
	}
	for _, n := range names {
		to := filepath.Join(dst, n)
		if _, err := d.Lstat(to); err == nil {
			continue // the same object is there already
		}
		if err := d.Rename(filepath.Join(src, n), to); err != nil {
			return fmt.Errorf("promote objects: %w", err)
		}
	}
	return nil
}

// HasObject reports whether key's mirror holds the object oid.
func (s *Store) HasObject(ctx context.Context, key repokey.Key, oid string) (bool, error) {
	if !s.Has(key) {
		return false, nil
	}
	if !gitcmd.IsOID(oid) {
		return false, fmt.Errorf("mirror %s: %q is not an object ID", key, oid)
	}
	err := s.git.Run(ctx, gitcmd.Cmd{GitDir: s.Path(key), Name: "cat-file", Flags: []string{"-e"}, Args: []string{oid}})
	var ge *gitcmd.Error
	if errors.As(err, &ge) && ge.ExitCode == 1 {
		return false, nil
	}
	return err == nil, err
}
