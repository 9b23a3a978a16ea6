package mirror

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A first mirror is made as `git clone --mirror` makes one, with gitfleet's
// checks on the way: four requests to the upstream, where a plain clone
// makes three, and nothing run over the objects that git has not to run
// anyway.
//
//  1. One ref listing (`git ls-remote --symref`: protocol v2's ls-refs, two
//     requests) gives the branches and tags, checked as they stream in
//     (MaxRefs, MaxRefLength, names that no file system or refspec holds:
//     gitcmd.ListRefsAndHead), and the branch HEAD points to. git 2.39's ls-remote
//     cannot ask for HEAD beside branches and tags alone, so the upstream
//     lists every ref to it, as the separate ask for HEAD that it replaces
//     did.
//  2. One fetch of exactly the listed objects (their IDs as refspecs, two
//     requests: git lists no refs when every refspec names an object), so
//     that what is stored is what was checked, whatever a second listing
//     would have said. The listed refs are written before it, in one
//     packed-refs file, as git clone writes them (a fetch would write each
//     as a file of its own, flushed or not, and `git pack-refs` then
//     delete them all: 0.5-1 s of system time on etcd's 962 refs, more
//     than a tenth of its clone). The objects are checked on the way in as
//     every fetch's are (fsck.go): index-pack --strict fscks each object
//     and checks that every object one of them names is in the pack (the
//     repository has no other objects). What is left for git fetch's own
//     connectivity check (rev-list --objects from the new tips, --not
//     --all) is that the tips themselves arrived: with the refs already
//     pointing at them, it finds each tip and stops there, instead of
//     walking every object again as it would from refs not yet written
//     (0.5 s of CPU on etcd; git clone skips that walk the same way, on
//     index-pack's word that the pack is self-contained and connected).
//     A tip that did not arrive fails the fetch, and the clone is
//     discarded. No other pass over the objects is made.
//  3. The one pack gets its bitmap, and the mirror its commit graph, at
//     once (freshMaintenance): the first clone served from it is cheap, and
//     maintenance has no mirror without a bitmap to reach after a batch of
//     new ones.
//
// The size watch bounds the fetch as it bounds every fetch (limits.go).

// listFirst lists url's branches and tags under the limits, with the branch
// its HEAD points to, in one listing (see above), and logs the refs it
// skips once per repository.
func (s *Store) listFirst(ctx context.Context, key repokey.Key, url string) (gitcmd.Listing, error) {
	l, err := s.git.ListRefsAndHead(ctx, url, s.refLimits())
	if err != nil {
		return gitcmd.Listing{}, err
	}
	s.logSkipped(key, l.Skipped)
	return l, nil
}

// fetchListed fetches exactly the objects of refs into the empty repository
// at dir, under the limits (runFetch), and points each ref at its object.
// The refs are written first, in one packed-refs file (gitcmd.PackedRefs),
// and the fetch asks for their objects by ID and writes no ref: see the
// comment at the top of this file.
func (s *Store) fetchListed(ctx context.Context, dir, url string, refs map[string]string) error {
	packed, err := gitcmd.PackedRefs(refs)
	if err != nil {
		return err
	}
	if err := s.data.WriteFile(filepath.Join(dir, "packed-refs"), packed); err != nil {
		return fmt.Errorf("write the listed refs: %w", err)
	}
	ids := make([]string, 0, len(refs))
	for _, oid := range refs {
		ids = append(ids, oid)
	}
	sort.Strings(ids)
	var spec strings.Builder
	for i, oid := range ids {
		if i > 0 && oid == ids[i-1] {
			continue
		}
		spec.WriteString(oid)
		spec.WriteByte('\n')
	}
	// On stdin: tens of thousands of IDs would not fit in argv. No
	// --prune, no --atomic: the fetch moves no ref.
	c := gitcmd.Cmd{GitDir: dir, Name: "fetch", Config: FsckConfig(),
		Flags: []string{"--no-write-fetch-head", "--no-tags", "--quiet", "--no-auto-gc", "--stdin"},
		Args:  []string{url}, Stdin: strings.NewReader(spec.String())}
	return s.runFetch(ctx, c, dir, url, gitcmd.Refs{Refs: refs}.Digest())
}

// clone fetches url into a fresh repository in tmp and renames it into
// place. A member of network (not "") is linked to its pool before the
// fetch, so that only what the pool lacks is downloaded (the pool's tips
// are haves, and a listed object the pool has is not asked for), and its
// refs are fetched into the pool once it is in place (pool.go).
func (s *Store) clone(ctx context.Context, key repokey.Key, url, network string) (gitcmd.Refs, error) {
	tmp, err := os.MkdirTemp(s.tmp, "clone-")
	if err != nil {
		return gitcmd.Refs{}, fmt.Errorf("mirror %s: %w", key, err)
	}
	defer s.data.RemoveAll(tmp)
	if err := s.git.Run(ctx, gitcmd.Cmd{Name: "init", Flags: []string{"--bare", "--quiet", "--template="}, Args: []string{tmp}}); err != nil {
		return gitcmd.Refs{}, err
	}
	pool := ""
	if network != "" {
		if pool, err = s.borrowPool(ctx, key, tmp, network); err != nil {
			return gitcmd.Refs{}, fmt.Errorf("mirror %s: %w", key, err)
		}
	}
	remote, err := s.listFirst(ctx, key, url)
	if err != nil {
		return gitcmd.Refs{}, err
	}
	if len(remote.Refs.Refs) > 0 {
		if err := s.fetchListed(ctx, tmp, url, remote.Refs.Refs); err != nil {
			return gitcmd.Refs{}, err
		}
		if err := s.checkCloneSize(tmp, url); err != nil {
			return gitcmd.Refs{}, err
		}
	}
	if err := s.setHead(ctx, tmp, remote.Refs.Head); err != nil {
		return gitcmd.Refs{}, err
	}
	if len(remote.Refs.Refs) > 0 && pool == "" {
		if err := s.freshMaintenance(ctx, tmp); err != nil {
			if ctx.Err() != nil {
				return gitcmd.Refs{}, err
			}
			// The clone is whole without them: maintenance makes them later.
			s.log.Warn("could not write a new mirror's bitmap and commit graph; maintenance will", "key", key, "err", err)
		}
	}
	refs, err := s.git.LocalRefs(ctx, tmp)
	if err != nil {
		return gitcmd.Refs{}, err
	}
	dst := s.Path(key)
	if err := s.data.MkdirAll(filepath.Dir(dst)); err != nil {
		return gitcmd.Refs{}, fmt.Errorf("mirror %s: %w", key, err)
	}
	if pool != "" {
		if err := s.placeLink(key, tmp, dst, pool); err != nil {
			return gitcmd.Refs{}, err
		}
	}
	if err := s.data.Rename(tmp, dst); err != nil {
		return gitcmd.Refs{}, fmt.Errorf("mirror %s: move clone into place: %w", key, err)
	}
	if s.testHookPlaced != nil {
		s.testHookPlaced(key)
	}
	if pool != "" {
		// The clone is whole without this (its objects are its own or the
		// pool's): a failure leaves the pool to catch up at the next fetch.
		if err := s.share(ctx, key, dst, network); err != nil {
			s.log.Warn("could not add a new member's objects to its pool; the next fetch will", "key", key, "network", network, "err", err)
		}
	}
	return refs, nil
}

// freshMaintenance runs maintenance's incremental run on a fresh clone at
// dir (maintain.go): its packed refs written again with the peeled values
// of its tags (`git pack-refs --all`), a multi-pack index with a bitmap over
// its one pack, which is not rewritten (0.5-0.65x the CPU of `git repack
// -a -d -b`, which rewrites it: BenchmarkFirstMirrorBitmap on etcd and
// bbolt), and a commit graph.
// When the pack holds only what the refs reach (the bitmap counts them at
// no cost), as a fresh clone from an honest upstream does, a full run would
// change nothing: the run is recorded as a full one, and maintenance runs
// none until the mirror is written to again. Otherwise it is not recorded,
// and maintenance owes the mirror its first full run, which drops what else
// the upstream put in the pack (bounded by MaxRepoSize).
func (s *Store) freshMaintenance(ctx context.Context, dir string) error {
	if _, err := s.maintain(ctx, dir, false); err != nil {
		return err
	}
	out, err := s.git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "rev-list",
		Flags: []string{"--count", "--objects", "--all", "--use-bitmap-index"}})
	if err != nil {
		return fmt.Errorf("count the objects the refs reach: %w", err)
	}
	reached, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return fmt.Errorf("count the objects the refs reach: %q: %w", out, err)
	}
	packed, err := packedObjects(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return err
	}
	if packed != reached {
		return nil // unrecorded: maintenance runs in full on a mirror never maintained
	}
	now := s.now()
	return s.writeMaintMarker(dir, now, now)
}

// packedObjects counts the objects of the packs in packDir, from their
// indexes' headers (version 2: a magic, a version, and a fan-out table whose
// last entry is the count).
func packedObjects(packDir string) (int64, error) {
	idx, err := filepath.Glob(filepath.Join(packDir, "pack-*.idx"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range idx {
		f, err := os.Open(p)
		if err != nil {
			return 0, err
		}
		var head [8 + 256*4]byte
		_, err = io.ReadFull(f, head[:])
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		if !bytes.Equal(head[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
			return 0, fmt.Errorf("%s: not a version 2 pack index", p)
		}
		n += int64(binary.BigEndian.Uint32(head[len(head)-4:]))
	}
	return n, nil
}
