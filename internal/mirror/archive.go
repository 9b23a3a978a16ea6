package mirror

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Rewritten history kept (opt-in, ArchivePolicy): every ref tip that a
// fetch or a verified pull takes away, by a force-push (a branch moved
// other than by a fast-forward, a moved tag) or a deletion, is kept under
// ArchiveRefs<unix seconds>/<ref>, so that the pruner and maintenance keep
// its objects (both keep what any ref reaches). These refs are never
// fetched into (the fetch refspecs name branches and tags only: a full
// node's pull from an owner never takes the owner's archive, it makes its
// own from what it applies), never part of the mirror's refs or digest
// (gitcmd reads MirroredRefs only), and hidden from clients by gitserve,
// which serves by id what they reach.
//
// A tip is never lost to a crash: a sync writes the archive refs of every
// ref the upstream's listing moves or deletes before its fetch moves any
// (archiveAhead), and after it removes those of the refs that only
// fast-forwarded and adds those of refs that moved between the listing
// and the fetch (settleArchive); a verified pull writes them in the same
// update-ref transaction as its ref changes. A crash between a sync's two
// steps leaves the archive ref of a fast-forward, which keeps nothing that
// the branch does not reach. An upstream that force-pushes in a loop is
// bounded by MaxRefs a repository (the oldest go first), and Retention
// expires archive refs in maintenance (expireArchive); the objects they
// kept go at the next prune.

// ArchiveRefs is the hidden namespace of the tips that rewrites and
// deletions took away.
const ArchiveRefs = "refs/archive/"

// DefaultArchiveMaxRefs is the most archive refs a repository keeps when
// ArchivePolicy.MaxRefs is not set.
const DefaultArchiveMaxRefs = 1000

// ArchivePolicy says which repositories keep the tips that rewrites and
// deletions take away, and for how long.
type ArchivePolicy struct {
	All bool                   // every repository (--archive-rewrites)
	Of  func(repokey.Key) bool // per repository (the catalog's archive: true); nil: none
	// Retention is how long an archive ref is kept (0: forever).
	Retention time.Duration
	// MaxRefs is the most archive refs a repository keeps, the oldest
	// going first (<= 0: DefaultArchiveMaxRefs).
	MaxRefs int
}

// SetArchive sets the archive policy. Call it before the store is used.
func (s *Store) SetArchive(p ArchivePolicy) {
	if p.MaxRefs <= 0 {
		p.MaxRefs = DefaultArchiveMaxRefs
	}
	p.Retention = max(p.Retention, 0)
	s.archive = p
}

func (s *Store) archiving(key repokey.Key) bool {
	return s.archive.All || (s.archive.Of != nil && s.archive.Of(key))
}

// ArchivedRef is one kept tip.
type ArchivedRef struct {
	Name string    // the archive ref: refs/archive/<unix>/<ref>
	Ref  string    // the ref whose tip it was
	OID  string    // the tip
	At   time.Time // when it was taken away (to the second)
}

func archiveName(at int64, ref string) string {
	return ArchiveRefs + strconv.FormatInt(at, 10) + "/" + ref
}

// parseArchived reads an archive ref's name; ok is false for a name that
// is not <unix>/refs/....
func parseArchived(name, oid string) (ArchivedRef, bool) {
	sec, ref, ok := strings.Cut(strings.TrimPrefix(name, ArchiveRefs), "/")
	n, err := strconv.ParseInt(sec, 10, 64)
	if !ok || err != nil || !strings.HasPrefix(ref, "refs/") {
		return ArchivedRef{}, false
	}
	return ArchivedRef{Name: name, Ref: ref, OID: oid, At: time.Unix(n, 0).UTC()}, true
}

// archiveNames names the archive refs of the tips of gone (their Old) at
// now: one second a batch, the first second from now on at which none of
// their names is taken in existing, so that no archive ref is overwritten
// by a later one of the same second.
func archiveNames(existing []ArchivedRef, gone []RefChange, now time.Time) []ArchivedRef {
	if len(gone) == 0 {
		return nil
	}
	taken := make(map[string]bool, len(existing))
	for _, a := range existing {
		taken[a.Name] = true
	}
	// Never before the newest kept: the cap lets the oldest go first,
	// and a new tip must not be it.
	at := now.Unix()
	for _, a := range existing {
		at = max(at, a.At.Unix())
	}
	for free := false; !free; {
		free = true
		for _, g := range gone {
			if taken[archiveName(at, g.Ref)] {
				free = false
				at++
				break
			}
		}
	}
	out := make([]ArchivedRef, 0, len(gone))
	for _, g := range gone {
		out = append(out, ArchivedRef{Name: archiveName(at, g.Ref), Ref: g.Ref, OID: g.Old, At: time.Unix(at, 0).UTC()})
	}
	return out
}

// archiveExpired picks among all the archive refs to delete at now: those
// older than retention (0: none), then the oldest past maxRefs.
func archiveExpired(all []ArchivedRef, now time.Time, retention time.Duration, maxRefs int) []ArchivedRef {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b ArchivedRef) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var out []ArchivedRef
	for len(sorted) > 0 && retention > 0 && !now.Before(sorted[0].At.Add(retention)) {
		out, sorted = append(out, sorted[0]), sorted[1:]
	}
	if maxRefs > 0 && len(sorted) > maxRefs {
		out = append(out, sorted[:len(sorted)-maxRefs]...)
	}
	return out
}

// Archive lists key's archive refs, oldest first.
func (s *Store) Archive(ctx context.Context, key repokey.Key) ([]ArchivedRef, error) {
	if !s.Has(key) {
		return nil, fmt.Errorf("mirror %s: %w", key, fs.ErrNotExist)
	}
	out, err := s.listArchive(ctx, s.Path(key))
	if err != nil {
		return nil, fmt.Errorf("mirror %s: %w", key, err)
	}
	slices.SortFunc(out, func(a, b ArchivedRef) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

func (s *Store) listArchive(ctx context.Context, dir string) ([]ArchivedRef, error) {
	out, err := s.git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "for-each-ref",
		Flags: []string{"--format=%(objectname) %(refname)"}, Args: []string{ArchiveRefs}})
	if err != nil {
		return nil, fmt.Errorf("list archive refs: %w", err)
	}
	var refs []ArchivedRef
	for line := range strings.Lines(string(out)) {
		oid, name, _ := strings.Cut(strings.TrimSpace(line), " ")
		if a, ok := parseArchived(name, oid); ok {
			refs = append(refs, a)
		}
	}
	return refs, nil
}

// archiveScript is the update-ref lines that create add and delete del.
func archiveScript(add, del []ArchivedRef) string {
	var b strings.Builder
	for _, a := range del {
		fmt.Fprintf(&b, "delete %s %s\n", a.Name, a.OID)
	}
	for _, a := range add {
		fmt.Fprintf(&b, "create %s %s\n", a.Name, a.OID)
	}
	return b.String()
}

func (s *Store) updateRefs(ctx context.Context, dir, script string) error {
	if script == "" {
		return nil
	}
	return s.git.Run(ctx, gitcmd.Cmd{GitDir: dir, Name: "update-ref", Flags: []string{"--stdin"},
		Stdin: strings.NewReader(script)})
}

// archiveAhead keeps, before a sync's fetch takes the mirror at dir from
// before to next (the upstream's listing), the tips of the refs it will
// move or delete. It returns the archive refs there were (existing) and
// those it wrote (pre), for settleArchive. Caller holds key's lock.
func (s *Store) archiveAhead(ctx context.Context, key repokey.Key, dir string, before, next map[string]string) (existing, pre []ArchivedRef, err error) {
	var moving []RefChange
	for ref, old := range before {
		if next[ref] != old {
			moving = append(moving, RefChange{Ref: ref, Old: old, New: next[ref]})
		}
	}
	if len(moving) == 0 {
		return nil, nil, nil
	}
	slices.SortFunc(moving, func(a, b RefChange) int { return strings.Compare(a.Ref, b.Ref) })
	if existing, err = s.listArchive(ctx, dir); err != nil {
		return nil, nil, fmt.Errorf("mirror %s: %w", key, err)
	}
	pre = archiveNames(existing, moving, s.now())
	if err := s.updateRefs(ctx, dir, archiveScript(pre, nil)); err != nil {
		return nil, nil, fmt.Errorf("mirror %s: keep the tips the fetch may take away: %w", key, err)
	}
	return existing, pre, nil
}

// settleArchive turns what archiveAhead wrote (pre, beside existing) into
// the archive of what the fetch took away (gone, see dropped): the archive
// refs of refs that only fast-forwarded (or did not move) go, the tips
// that went without one (the upstream moved between its listing and the
// fetch) get one, and the oldest past the cap go. Caller holds key's lock.
func (s *Store) settleArchive(ctx context.Context, key repokey.Key, dir string, existing, pre []ArchivedRef, gone []RefChange) {
	goneOld := make(map[string]string, len(gone))
	for _, g := range gone {
		goneOld[g.Ref] = g.Old
	}
	var del, kept []ArchivedRef
	covered := map[string]bool{}
	for _, p := range pre {
		if old, ok := goneOld[p.Ref]; ok && old == p.OID && !covered[p.Ref] {
			covered[p.Ref] = true
			kept = append(kept, p)
		} else {
			del = append(del, p)
		}
	}
	var missing []RefChange
	for _, g := range gone {
		if !covered[g.Ref] {
			missing = append(missing, g)
		}
	}
	now := s.now()
	add := archiveNames(append(slices.Clone(existing), pre...), missing, now)
	all := append(append(slices.Clone(existing), kept...), add...)
	add, capped := s.applyArchiveCap(all, add, now)
	del = append(del, capped...)
	if err := s.updateRefs(ctx, dir, archiveScript(add, del)); err != nil {
		s.log.Error("could not settle the archive of the tips a fetch took away", "key", key, "err", err)
		return
	}
	if len(kept)+len(add) > 0 {
		s.log.Info("kept the tips a rewrite or deletion took away", "key", key, "refs", len(kept)+len(add))
	}
}

// applyArchiveCap is the policy's expiry (retention, MaxRefs) over all,
// which includes add, the archive refs about to be created: it returns
// those of add still to create, and the existing ones to delete.
func (s *Store) applyArchiveCap(all, add []ArchivedRef, now time.Time) (create, del []ArchivedRef) {
	expired := archiveExpired(all, now, s.archive.Retention, s.archive.MaxRefs)
	gone := make(map[string]bool, len(expired))
	for _, a := range expired {
		gone[a.Name] = true
	}
	adding := make(map[string]bool, len(add))
	for _, a := range add {
		adding[a.Name] = true
		if !gone[a.Name] {
			create = append(create, a)
		}
	}
	for _, a := range expired {
		if !adding[a.Name] {
			del = append(del, a)
		}
	}
	return create, del
}

// archivePull is the update-ref lines that keep, in a verified pull's own
// transaction, the tips its changes take away (gone), with the cap's
// deletions. Caller holds key's lock.
func (s *Store) archivePull(ctx context.Context, key repokey.Key, dir string, gone []RefChange) (string, error) {
	if len(gone) == 0 {
		return "", nil
	}
	existing, err := s.listArchive(ctx, dir)
	if err != nil {
		return "", fmt.Errorf("mirror %s: %w", key, err)
	}
	now := s.now()
	add := archiveNames(existing, gone, now)
	add, del := s.applyArchiveCap(append(existing, add...), add, now)
	return archiveScript(add, del), nil
}

// expireArchive deletes the archive refs of the mirror at dir that the
// retention or the cap let go, and marks the mirror for pruning when it
// deleted any. Maintenance runs it. Caller holds key's lock.
func (s *Store) expireArchive(ctx context.Context, key repokey.Key, dir string) error {
	existing, err := s.listArchive(ctx, dir)
	if err != nil || len(existing) == 0 {
		return err
	}
	_, del := s.applyArchiveCap(existing, nil, s.now())
	if len(del) == 0 {
		return nil
	}
	if err := s.updateRefs(ctx, dir, archiveScript(nil, del)); err != nil {
		return fmt.Errorf("expire archive refs: %w", err)
	}
	at, err := s.mark(dir)
	if err != nil {
		return err
	}
	s.notePrune(key, at)
	s.log.Info("archive refs expired", "key", key, "refs", len(del))
	return nil
}

// settleArchiveFailed settles archiveAhead's refs after a fetch that
// failed: with the refs as before (--atomic) it wrote nothing that needs
// keeping; refs that moved all the same are settled by what they dropped.
func (s *Store) settleArchiveFailed(ctx context.Context, key repokey.Key, dir string, before gitcmd.Refs, existing, pre []ArchivedRef) {
	if len(pre) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	now, err := s.git.StoredRefs(ctx, dir)
	if err != nil {
		return // unknown: what was written stays
	}
	var gone []RefChange
	if now.Digest() != before.Digest() {
		gone, _ = s.dropped(ctx, dir, before, now)
	}
	s.settleArchive(ctx, key, dir, existing, pre, gone)
}
