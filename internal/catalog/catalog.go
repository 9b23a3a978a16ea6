// Package catalog owns the catalog: the git repository that lists the
// upstream URLs gitfleet mirrors. It reads a catalog commit in bulk (one
// ls-tree and one cat-file process), parses both file forms (".list" files
// of one URL per line, and Compass-CI style YAML files with DEFAULTS),
// normalises every URL to its repository key (a repokey.Key, made by
// repokey's parsers only; the keys of a file share one string), reports
// bad entries with file and line, and turns the change between two commits into an entry-level
// Delta that costs O(changed files), not O(catalog), from a catalog in
// memory (Update) or from the two commits alone (Diff). It also keeps the
// coordinator's clone of the catalog repository (Source), checks a Delta
// against mass deletions (CheckPurge) and names what that holds back
// (HeldSummary).
//
// It runs git, through package gitcmd, to read and fetch catalogs and to
// write synthetic ones (Generate, for benchmarks). Its state is the coordinator's clone on disk, which Source fetches one at a
// time, and Catalog values, which are immutable; it keeps nothing else. It
// must not decide anything about placement, nodes or fetching: the
// coordinator decides when a new Catalog is applied, and whether a
// change's removals are held.
package catalog

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Entry is one upstream repository of the catalog.
type Entry struct {
	// Key is the repository key (see package repokey).
	Key repokey.Key
	// URL is the upstream to fetch (cleaned by repokey.Normalize).
	URL string
	// Fallbacks are the other URLs of a YAML entry's url list.
	Fallbacks []string
	// Attrs are the entry's other YAML keys merged over the DEFAULTS above
	// it; lists and maps are compact JSON. It is shared: do not modify it.
	Attrs map[string]string
	// File and Line locate the entry (the line of its URL).
	File string
	Line int
}

// Problem severities. Errors fail `gitfleet catalog check`; warnings do not.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Problem is something wrong in the catalog, located by file and line.
type Problem struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Key      string `json:"key,omitempty"`
	Reason   string `json:"reason"`
	Severity string `json:"severity"`
	// Refused says the entry was refused by the egress policy (an
	// *egress.BlockedError): its host or address is one this mirror's
	// options do not allow, although the entry may be well formed. Purge
	// protection reads it (a changed policy must not drop repositories
	// in bulk).
	Refused bool `json:"refused,omitempty"`
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Reason) }

// Options say how entries are checked.
type Options struct {
	// AllowPrivate is passed to repokey.Normalize: upstreams on loopback
	// and private networks are accepted (tests and demos).
	AllowPrivate bool
	// Egress, when set, is the operator's egress policy (see repokey.Options).
	Egress *egress.Policy
	// Fold says which hosts' paths are case-insensitive (see repokey.Folding).
	Fold repokey.Folding
	// Log receives one summary line per Load and Update (nil: silent).
	Log *slog.Logger
	// Prepare, when set, is called by Load once it has listed the files
	// and before it reads any, with an estimate of their total size in
	// bytes: a process about to hold a whole catalog can prepare its
	// memory. It is not called when the size cannot be estimated.
	Prepare func(bytes int64)
}

// A Catalog is the parsed content of one commit: entries by key, plus
// per-file bookkeeping so that an update re-reads only changed files. It is
// immutable, so safe for concurrent use: Update returns a new Catalog that
// shares what did not change.
type Catalog struct {
	commit string
	opt    Options
	files  fileTable
	keys   keyIndex
	// defaults holds the own attributes of each directory's DEFAULTS file,
	// by directory ("" is the root).
	defaults map[string]map[string]string
}

// Commit is the commit the catalog was read from.
func (c *Catalog) Commit() string { return c.commit }

// Len is the number of distinct keys.
func (c *Catalog) Len() int { return c.keys.n }

// Get returns the entry of key, given as it is written: a lookup, not a
// check (a key that is not the catalog's is not found), and the Entry's
// Key is the one the catalog parsed. Finding its line costs a walk of its
// file.
func (c *Catalog) Get(key string) (Entry, bool) {
	e := c.keys.get(key)
	if e == nil {
		return Entry{}, false
	}
	f := c.files.get(e.name.path)
	return e.export(f, f.lineOf(e)), true
}

// Range calls fn for every entry, one per key, in file path order and then
// line order, until fn returns false. It sorts the file list, so it costs
// O(files log files) on top of the walk.
func (c *Catalog) Range(fn func(Entry) bool) {
	for _, f := range c.sortedFiles() {
		for i, e := range f.entries {
			if c.keys.kept(e) && !fn(e.export(f, int(f.lines[i]))) {
				return
			}
		}
	}
}

// Has reports whether the catalog lists key (given as it is written).
func (c *Catalog) Has(key string) bool { return c.keys.get(key) != nil }

// Keys calls fn for every key, in no particular order, until fn returns
// false. Unlike Range it allocates nothing per entry: the coordinator uses
// it to place a million keys.
func (c *Catalog) Keys(fn func(key repokey.Key) bool) {
	stop := false
	c.files.each(func(f *fileData) {
		for _, e := range f.entries {
			if stop {
				return
			}
			if c.keys.kept(e) && !fn(e.key) {
				stop = true
			}
		}
	})
}

// AttrNetwork is the attribute that declares an entry's fork network
// (package network): a name that network.CheckName accepts, or the
// attribute is skipped with a problem.
const AttrNetwork = "network"

// AttrArchive is the attribute that makes the mirrors of an entry keep the
// tips that force-pushes and deletions take away, under refs/archive/
// (archive: true; package mirror's ArchivePolicy).
const AttrArchive = "archive"

// Archives tells whether attrs ask for the archive of rewritten history:
// AttrArchive is true (as YAML and strconv.ParseBool say it).
func Archives(attrs map[string]string) bool {
	on, _ := strconv.ParseBool(attrs[AttrArchive])
	return on
}

// Attr calls fn for every entry that has attribute name, with its value,
// in no particular order, until fn returns false. Like Keys it allocates
// nothing per entry.
func (c *Catalog) Attr(name string, fn func(key repokey.Key, value string) bool) {
	stop := false
	c.files.each(func(f *fileData) {
		for _, e := range f.entries {
			if stop {
				return
			}
			if v, ok := e.attrs(f)[name]; ok && c.keys.kept(e) && !fn(e.key, v) {
				stop = true
			}
		}
	})
}

// Problems returns every problem of the catalog (bad entries, unreadable
// files, duplicates) in file and line order.
func (c *Catalog) Problems() []Problem {
	var out []Problem
	c.files.each(func(f *fileData) { out = append(out, f.problems...) })
	var lines lineCache
	lineOf := func(e *entry) int { return lines.of(c.files.get(e.name.path), e) }
	c.keys.eachDup(func(kept, dup *entry) {
		if strings.HasPrefix(dup.name.path, listerMark) {
			return // a listed repository also written in the catalog, or by two listers
		}
		out = append(out, Problem{File: dup.name.path, Line: lineOf(dup), Key: dup.key.String(), Severity: SeverityWarning,
			Reason: fmt.Sprintf("duplicate of %s kept at %s:%d (the first by file path and line is kept)",
				kept.key, kept.name.path, lineOf(kept))})
	})
	sortProblems(out)
	return out
}

func sortProblems(ps []Problem) {
	slices.SortFunc(ps, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), strings.Compare(a.Reason, b.Reason))
	})
}

func (c *Catalog) sortedFiles() []*fileData {
	fs := make([]*fileData, 0, c.files.n)
	c.files.each(func(f *fileData) {
		if len(f.entries) > 0 {
			fs = append(fs, f)
		}
	})
	slices.SortFunc(fs, func(a, b *fileData) int { return strings.Compare(a.name.path, b.name.path) })
	return fs
}

// fileName is the identity of a catalog path, shared by every version of
// its file, like the entries that do not change between versions.
type fileName struct{ path string }

// fileData is one version of what a catalog file contributed. It is never
// modified once built: an update replaces it with a new version that
// shares the entries that did not change, so that the key index needs no
// change for them.
type fileData struct {
	name *fileName
	// entries are in line order: lines[i] is the line of entries[i].
	entries  []*entry
	lines    []int32
	problems []Problem
	// attrs are the merged DEFAULTS above this file (shared, may be nil).
	attrs map[string]string
	// listers are the file's lister lines, in line order.
	listers []Lister
	// lister, when set, is the lister whose listing this synthetic file
	// holds (WithListings), made from listedFrom.
	lister     *Lister
	listedFrom []Listed
	// allocated counts the entries made for this path since it was last
	// read whole. Versions share entries, so the arrays they were made in
	// stay alive while one of them is used: this bounds that waste.
	allocated int
}

// setEntries makes slab (just parsed) the entries of f.
func (f *fileData) setEntries(slab []entry, lines []int32) {
	f.entries = make([]*entry, len(slab))
	for i := range slab {
		f.entries[i] = &slab[i]
	}
	f.lines, f.allocated = lines, len(slab)
}

// lineOf is the line of e in f (a walk of the file).
func (f *fileData) lineOf(e *entry) int {
	for i, x := range f.entries {
		if x == e {
			return int(f.lines[i])
		}
	}
	return 0
}

// lineCache finds the lines of entries; for big files it indexes them
// once, so that a change to a whole big file stays linear.
type lineCache map[*fileData]map[*entry]int32

func (lc *lineCache) of(f *fileData, e *entry) int {
	if len(f.entries) < 64 {
		return f.lineOf(e)
	}
	if *lc == nil {
		*lc = make(lineCache)
	}
	m, ok := (*lc)[f]
	if !ok {
		m = make(map[*entry]int32, len(f.entries))
		for i, x := range f.entries {
			m[x] = f.lines[i]
		}
		(*lc)[f] = m
	}
	return int(m[e])
}

// entry is the compact form of an Entry: most entries of a big catalog are
// "https://" + key (+ ".git"), with nothing else, and cost 40 bytes plus
// their key (which shares one string per file), plus 12 in their file.
type entry struct {
	key   repokey.Key
	name  *fileName
	extra *extra
	form  urlForm
}

// urlForm says how an entry's URL is rebuilt from its key.
type urlForm uint8

const (
	formExtra    urlForm = iota // extra.url
	formHTTPS                   // "https://" + key
	formHTTPSGit                // "https://" + key + ".git"
)

// extra holds what few entries have.
type extra struct {
	url       string
	fallbacks []string
	// attrs, when set, replaces the file's attrs (own keys merged over them).
	attrs map[string]string
}

func (e *entry) url() string {
	switch e.form {
	case formHTTPS:
		return "https://" + e.key.String()
	case formHTTPSGit:
		return "https://" + e.key.String() + ".git"
	}
	return e.extra.url
}

// attrs are the attributes of e, an entry of f.
func (e *entry) attrs(f *fileData) map[string]string {
	if e.extra != nil && e.extra.attrs != nil {
		return e.extra.attrs
	}
	return f.attrs
}

// export makes the Entry of e, on line of f.
func (e *entry) export(f *fileData, line int) Entry {
	out := Entry{Key: e.key, URL: e.url(), Attrs: e.attrs(f), File: e.name.path, Line: line}
	if f.lister != nil { // a listed repository is located by its lister's line
		out.File, out.Line = f.lister.File, f.lister.Line
	}
	if e.extra != nil {
		out.Fallbacks = e.extra.fallbacks
	}
	return out
}

// sameContent says whether a (of file fa) and b (of fb) would be fetched
// and shown the same way: where they are does not matter, a moved entry is
// not a change.
func sameContent(a *entry, fa *fileData, b *entry, fb *fileData) bool {
	if a.form != b.form || a.form == formExtra && a.extra.url != b.extra.url || a.key != b.key ||
		!maps.Equal(a.attrs(fa), b.attrs(fb)) {
		return false
	}
	var fallA, fallB []string
	if a.extra != nil {
		fallA = a.extra.fallbacks
	}
	if b.extra != nil {
		fallB = b.extra.fallbacks
	}
	return slices.Equal(fallA, fallB)
}

// compareLocations orders entries for the duplicate rule: of entries with
// the same key, the one in the first file by path (byte order), then on
// the first line, is kept.
func compareLocations(pathA string, lineA int, pathB string, lineB int) int {
	return cmp.Or(strings.Compare(pathA, pathB), cmp.Compare(lineA, lineB))
}
