package catalog

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"golang.org/x/sync/errgroup"
)

// Load reads the catalog at commit (any revision) of the repository
// repoDir (a git directory): one ls-tree and one cat-file process for all
// files, parsed in parallel. Bad entries are reported in Problems and
// skipped; an error means the commit could not be read at all.
func Load(ctx context.Context, git *gitcmd.Runner, repoDir, commit string, opt Options) (*Catalog, error) {
	id, err := resolveCommit(ctx, git, repoDir, commit)
	if err != nil {
		return nil, err
	}
	blobs, err := lsTree(ctx, git, repoDir, id, "")
	if err != nil {
		return nil, err
	}
	if opt.Prepare != nil {
		if size, err := estimateSize(ctx, git, repoDir, blobs); err == nil {
			opt.Prepare(size)
		} else if opt.Log != nil {
			opt.Log.Warn("catalog size not estimated", "err", err)
		}
	}
	own := make(map[string]map[string]string)
	defFiles, entryFiles, err := readFiles(ctx, git, repoDir, blobs, own, opt)
	if err != nil {
		return nil, err
	}
	var kept, withEntries []*fileData
	problems := 0
	for _, f := range slices.Concat(defFiles, entryFiles) {
		if f != nil {
			kept = append(kept, f)
			problems += len(f.problems)
			if len(f.entries) > 0 {
				withEntries = append(withEntries, f)
			}
		}
	}
	c := &Catalog{commit: id, opt: opt, files: newFileTable(kept), keys: buildKeyIndex(withEntries), defaults: own}
	if opt.Log != nil {
		c.keys.eachDup(func(_, _ *entry) { problems++ })
		opt.Log.Info("catalog loaded", "commit", id, "entries", c.Len(), "files", len(blobs), "problems", problems)
	}
	return c, nil
}

// readFiles reads blobs with one cat-file process: the DEFAULTS first, in
// order, recorded into own (which it modifies), then the entry files,
// parsed in parallel with the DEFAULTS that apply to them. Each result is
// nil when the file contributes nothing (no entry, no problem).
func readFiles(ctx context.Context, git *gitcmd.Runner, repoDir string, blobs []blob, own map[string]map[string]string, opt Options) (defFiles, entryFiles []*fileData, err error) {
	var defs, others []blob
	for _, b := range blobs {
		if b.kind == kindDefaults {
			defs = append(defs, b)
		} else {
			others = append(others, b)
		}
	}
	oids := make([]string, 0, len(blobs))
	for _, b := range slices.Concat(defs, others) {
		oids = append(oids, b.oid)
	}
	defFiles = make([]*fileData, len(defs))
	entryFiles = make([]*fileData, len(others))
	keyOpt := repokey.Options{AllowPrivate: opt.AllowPrivate, Egress: opt.Egress, Fold: opt.Fold}
	merged := defaultsAbove(own)

	type job struct {
		i    int
		size int64
		data []byte
	}
	workers := runtime.GOMAXPROCS(0)
	jobs := make(chan job, 2*workers)
	// The blobs' buffers go back to the reader once parsed: a load then
	// makes a few buffers instead of one per file.
	free := make(chan []byte, 3*workers)
	alloc := func(n int) []byte {
		select {
		case b := <-free:
			if cap(b) >= n {
				return b[:n]
			}
		default:
		}
		return make([]byte, n)
	}
	g, gctx := errgroup.WithContext(ctx)
	for range workers {
		g.Go(func() error {
			var sc scratch
			for j := range jobs {
				b := others[j.i]
				f := &fileData{name: &fileName{b.path}, attrs: attrsFor(merged, dirOf(b.path))}
				if j.data == nil {
					f.problem(1, SeverityError, "", tooLarge(j.size))
				} else {
					parseEntries(f, b.kind, j.data, keyOpt, &sc)
					select {
					case free <- j.data:
					default:
					}
				}
				if len(f.entries) > 0 || len(f.problems) > 0 || len(f.listers) > 0 {
					entryFiles[j.i] = f
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(jobs)
		return catBlobs(gctx, git, repoDir, oids, alloc, func(i int, size int64, data []byte) error {
			if i < len(defs) {
				f := &fileData{name: &fileName{defs[i].path}}
				var attrs map[string]string
				if data == nil {
					f.problem(1, SeverityError, "", tooLarge(size))
				} else {
					attrs = parseDefaults(f, data)
				}
				own[dirOf(defs[i].path)] = attrs
				if len(f.problems) > 0 {
					defFiles[i] = f
				}
				if i == len(defs)-1 {
					merged = defaultsAbove(own) // before the first job: workers see it
				}
				return nil
			}
			select {
			case jobs <- job{i: i - len(defs), size: size, data: data}:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	})
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return defFiles, entryFiles, nil
}

func tooLarge(size int64) string {
	return fmt.Sprintf("file of %d bytes is larger than the %d bytes a catalog file may have; skipped", size, maxFileSize)
}

// Delta is what changed between two catalogs, by key. An entry that moved
// to another file or line but is fetched and shown the same is not in it.
type Delta struct {
	// Added are keys that are new.
	Added []Entry
	// Removed are keys that are gone (as they were).
	Removed []Entry
	// Changed are keys whose URL, fallbacks or attributes changed (as they
	// are now).
	Changed []Entry
	// ListersAdded and ListersRemoved are the lister lines that are new
	// and gone, in the files that changed (a lister whose attributes
	// changed is in both). The entries listers make are not in the
	// catalog read from git: see WithListings.
	ListersAdded, ListersRemoved []Lister
}

// Update returns the catalog at newCommit and what changed since c. It
// reads only the files that differ between the two commits (`git
// diff-tree`), plus the files below a DEFAULTS that changed, so its cost
// follows the change, not the catalog. c is not modified: the new Catalog
// shares c's unchanged files, and c stays valid.
func (c *Catalog) Update(ctx context.Context, git *gitcmd.Runner, repoDir, newCommit string) (*Catalog, Delta, error) {
	id, err := resolveCommit(ctx, git, repoDir, newCommit)
	if err != nil {
		return nil, Delta{}, err
	}
	if id == c.commit {
		return c, Delta{}, nil
	}
	changes, err := diffTree(ctx, git, repoDir, c.commit, id)
	if err != nil {
		return nil, Delta{}, err
	}
	return c.apply(ctx, git, repoDir, id, changes)
}

// apply is Update to the commit id, given the paths that differ.
func (c *Catalog) apply(ctx context.Context, git *gitcmd.Runner, repoDir, id string, changes []treeChange) (*Catalog, Delta, error) {
	touched := make(map[string]*fileData)
	var blobs []blob
	var defDirs []string
	for _, ch := range changes {
		touched[ch.path] = nil
		kind := classify(ch.path)
		if ch.oid != "" {
			blobs = append(blobs, blob{path: ch.path, oid: ch.oid, kind: kind})
		}
		if kind == kindDefaults {
			defDirs = append(defDirs, dirOf(ch.path))
		}
	}
	own := c.defaults
	if len(defDirs) > 0 {
		own = maps.Clone(c.defaults)
		for _, dir := range defDirs {
			delete(own, dir)
		}
		// Files below a changed DEFAULTS are read again: their attributes
		// may have changed even though they did not.
		for _, dir := range outermost(defDirs) {
			below, err := lsTree(ctx, git, repoDir, id, dir)
			if err != nil {
				return nil, Delta{}, err
			}
			for _, b := range below {
				if _, ok := touched[b.path]; !ok && b.kind != kindDefaults {
					touched[b.path] = nil
					blobs = append(blobs, b)
				}
			}
		}
	}
	defFiles, entryFiles, err := readFiles(ctx, git, repoDir, blobs, own, c.opt)
	if err != nil {
		return nil, Delta{}, err
	}
	for _, f := range slices.Concat(defFiles, entryFiles) {
		if f != nil {
			touched[f.name.path] = f
		}
	}
	delta, keyChanges := c.diffEntries(touched)
	delta.ListersAdded, delta.ListersRemoved = c.diffListers(touched)
	next := &Catalog{commit: id, opt: c.opt, files: c.files.with(touched), keys: c.keys.with(keyChanges), defaults: own}
	if c.opt.Log != nil {
		c.opt.Log.Info("catalog updated", "from", c.commit, "to", id, "files", len(touched),
			"added", len(delta.Added), "removed", len(delta.Removed), "changed", len(delta.Changed), "entries", next.Len())
	}
	return next, delta, nil
}

// outermost drops the directories that are below another one of dirs.
func outermost(dirs []string) []string {
	slices.Sort(dirs)
	var out []string
	for _, d := range dirs {
		if len(out) > 0 {
			last := out[len(out)-1]
			if last == "" || d == last || strings.HasPrefix(d, last+"/") {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}

// diffEntries works out what the files being replaced (by the new
// versions in files; nil: removed) change. A new version first shares the
// entries of the old one that did not change, so only the keys of the
// other entries need a new state in the index: the work follows the
// change, even inside a big file.
func (c *Catalog) diffEntries(files map[string]*fileData) (Delta, map[repokey.Key]keyState) {
	gone := make(map[*entry]bool) // entries of the old versions that are not in the new
	var fresh []*entry            // entries of the new versions that are not in the old
	for path, nf := range files {
		of := c.files.get(path)
		var reused map[*entry]bool
		if nf != nil {
			var f []*entry
			f, reused = share(of, nf)
			fresh = append(fresh, f...)
		}
		if of != nil {
			for _, e := range of.entries {
				if !reused[e] {
					gone[e] = true
				}
			}
		}
	}
	// The fresh entries by key (most keys have one: more holds the rest),
	// and nil for the keys of the gone entries.
	first := make(map[repokey.Key]*entry, len(gone)+len(fresh))
	more := make(map[repokey.Key][]*entry)
	for e := range gone {
		first[e.key] = nil
	}
	for _, e := range fresh {
		if first[e.key] == nil {
			first[e.key] = e
		} else {
			more[e.key] = append(more[e.key], e)
		}
	}
	// newFile is the file of an entry of the new catalog.
	newFile := func(e *entry) *fileData {
		if f, ok := files[e.name.path]; ok {
			return f
		}
		return c.files.get(e.name.path)
	}
	var lines lineCache
	var d Delta
	states := make(map[repokey.Key]keyState, len(first))
	var cands []*entry
	for key, e := range first {
		oldKept, oldDups := c.keys.lookup(key)
		var st keyState
		if len(oldDups) == 0 && more[key] == nil && (oldKept == nil || gone[oldKept]) {
			st.kept = e // the common case: one entry, new or gone
		} else {
			cands = append(cands[:0], more[key]...)
			if e != nil {
				cands = append(cands, e)
			}
			for _, o := range append([]*entry{oldKept}, oldDups...) {
				if o != nil && !gone[o] {
					cands = append(cands, o)
				}
			}
			if len(cands) > 0 {
				slices.SortFunc(cands, func(a, b *entry) int {
					return compareLocations(a.name.path, lines.of(newFile(a), a), b.name.path, lines.of(newFile(b), b))
				})
				st.kept = cands[0]
				if len(cands) > 1 {
					st.dups = slices.Clone(cands[1:])
				}
			}
		}
		states[key] = st
		var of, nf *fileData
		if oldKept != nil {
			of = c.files.get(oldKept.name.path)
		}
		if st.kept != nil {
			nf = newFile(st.kept)
		}
		switch {
		case oldKept == nil && st.kept != nil:
			d.Added = append(d.Added, st.kept.export(nf, lines.of(nf, st.kept)))
		case oldKept != nil && st.kept == nil:
			d.Removed = append(d.Removed, oldKept.export(of, lines.of(of, oldKept)))
		case oldKept != nil && !sameContent(oldKept, of, st.kept, nf):
			d.Changed = append(d.Changed, st.kept.export(nf, lines.of(nf, st.kept)))
		}
	}
	for _, es := range [][]Entry{d.Added, d.Removed, d.Changed} {
		slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(string(a.Key), string(b.Key)) })
	}
	return d, states
}

// share makes nf, the new version of the file of, use the entries of of
// that did not change (it is not shared yet, so it may be modified), and
// returns the entries of nf that are new and the entries of of it reuses.
func share(of, nf *fileData) (fresh []*entry, reused map[*entry]bool) {
	if of == nil {
		return nf.entries, nil
	}
	nf.name = of.name
	// Match each new entry with the first unmatched old one of its key.
	match := make([]*entry, len(nf.entries))
	nFresh := len(nf.entries)
	if maps.Equal(of.attrs, nf.attrs) {
		first := make(map[repokey.Key]int, len(of.entries)) // index of the next old entry of a key
		next := make([]int, len(of.entries))                // index of the old entry of the same key after i
		for i := len(of.entries) - 1; i >= 0; i-- {
			k := of.entries[i].key
			if j, ok := first[k]; ok {
				next[i] = j
			} else {
				next[i] = -1
			}
			first[k] = i
		}
		for i, e := range nf.entries {
			j, ok := first[e.key]
			if !ok || j < 0 || !sameContent(of.entries[j], of, e, nf) {
				continue
			}
			match[i] = of.entries[j]
			first[e.key] = next[j]
			nFresh--
		}
	}
	if of.allocated+nFresh > 2*len(nf.entries)+16 {
		// Too much of older arrays would stay alive for a few entries:
		// take the new version whole (its keys all move in the index).
		clear(match)
		nFresh = len(nf.entries)
	} else {
		nf.allocated = of.allocated + nFresh
	}
	reused = make(map[*entry]bool, len(nf.entries)-nFresh)
	slab := make([]entry, 0, nFresh) // the fresh entries, in an array of their size
	for i, e := range nf.entries {
		if match[i] != nil {
			nf.entries[i] = match[i]
			reused[match[i]] = true
			continue
		}
		e.name = of.name
		if nFresh < len(nf.entries) {
			// Copied out, with its own key, so that the arrays of the
			// parse (made for the whole file) are not kept alive.
			slab = append(slab, *e) // cap is nFresh: no reallocation
			slab[len(slab)-1].key = e.key.Clone()
			nf.entries[i] = &slab[len(slab)-1]
		}
		fresh = append(fresh, nf.entries[i])
	}
	return fresh, reused
}
