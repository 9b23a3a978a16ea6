package catalog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"go.yaml.in/yaml/v3"
)

// Listers. A catalog line whose path ends in "/*" (the repositories of an
// organisation, a user or a group) or "/**" (a GitLab group's, with its
// subgroups') is a lister, not a key: the coordinator asks the forge for
// the repositories it names (package forge), and WithListings turns the
// last good answer of each lister into entries of a synthetic file, which
// the key index, Delta and purge protection treat like any other. Filters
// are attributes of the line (AttrForks, AttrArchived, AttrMaxSize,
// AttrTopics); in a .list file they follow the URL as a YAML flow
// mapping's content: `https://github.com/org/* forks: false, topics: [a, b]`.

// Attributes of a lister line.
const (
	// AttrForks: false leaves forks out.
	AttrForks = "forks"
	// AttrArchived: false leaves archived repositories out.
	AttrArchived = "archived"
	// AttrMaxSize leaves out repositories larger than it (bytes, or a
	// size with a unit: 500MB, 2GiB).
	AttrMaxSize = "max-size"
	// AttrTopics keeps only repositories with one of the topics (a list,
	// or one topic).
	AttrTopics = "topics"
	// AttrLister is set on every entry a lister made: the lister's
	// pattern (its provenance, shown by the API and the console).
	AttrLister = "lister"
)

// filterAttrs are the attributes that filter a listing; they are not
// passed on to the entries it makes.
var filterAttrs = []string{AttrForks, AttrArchived, AttrMaxSize, AttrTopics}

// Lister is a lister line of the catalog.
type Lister struct {
	// Pattern is the line in one spelling ("https://github.com/org/*"):
	// it names the lister, in the API and in the store.
	Pattern string
	// Base is the scheme and host of the repositories' URLs
	// ("https://github.com"), Host the host as in keys ("github.com").
	Base, Host string
	// Owner is the organisation, user or group, as written ("Org",
	// "group/sub").
	Owner string
	// Subgroups: "/**", the group's subgroups too.
	Subgroups bool
	Filter    Filter
	// Attrs are the line's attributes (with its DEFAULTS), less the
	// filters: every entry the lister makes has them, and AttrLister.
	Attrs map[string]string
	File  string
	Line  int
}

// Filter says which listed repositories a lister keeps.
type Filter struct {
	NoForks, NoArchived bool
	MaxSize             int64    // bytes; 0: any size
	Topics              []string // any of them; none: every repository
}

// Keeps tells whether f keeps r.
func (f Filter) Keeps(r Listed) bool {
	if f.NoForks && r.Fork || f.NoArchived && r.Archived || f.MaxSize > 0 && r.Size > f.MaxSize {
		return false
	}
	if len(f.Topics) == 0 {
		return true
	}
	for _, t := range r.Topics {
		if slices.Contains(f.Topics, t) {
			return true
		}
	}
	return false
}

// Listed is a repository a forge listed for a lister.
type Listed struct {
	// Name is its full path on the host ("org/name", "group/sub/name").
	Name     string   `json:"name"`
	ID       int64    `json:"id,omitempty"`
	Fork     bool     `json:"fork,omitempty"`
	Archived bool     `json:"archived,omitempty"`
	Size     int64    `json:"size,omitempty"` // bytes, as the forge counts them
	Topics   []string `json:"topics,omitempty"`
}

// isLister tells a line that names a lister (or tries to): it has a "*".
func isLister(l []byte) bool { return bytes.IndexByte(l, '*') >= 0 }

// parseLister reads a lister line's URL with its attributes (merged over
// the DEFAULTS above it).
func parseLister(raw string, attrs map[string]string, opt repokey.Options) (Lister, error) {
	bad := func(format string, a ...any) (Lister, error) {
		return Lister{}, fmt.Errorf("lister %q: %s", truncateLine(repokey.Redact(raw)), fmt.Sprintf(format, a...))
	}
	var l Lister
	rest, ok := strings.CutSuffix(raw, "/**")
	if ok {
		l.Subgroups = true
	} else if rest, ok = strings.CutSuffix(raw, "/*"); !ok {
		return bad(`a "*" may only end the path, as "/*" (an owner's repositories) or "/**" (a group's, with its subgroups')`)
	}
	if strings.Contains(rest, "*") {
		return bad(`a "*" may only end the path, as "/*" or "/**"`)
	}
	if strings.HasSuffix(rest, "/") || !strings.Contains(rest, "://") {
		return bad("want SCHEME://HOST/OWNER/* (an owner to list)")
	}
	// The owner must be a path of the host: a probe repository below it
	// gets the key, the host and the egress policy's word.
	key, fetch, err := repokey.Normalize(rest+"/x", opt)
	if err != nil {
		return bad("%v", err)
	}
	if !strings.HasSuffix(fetch, "/x") {
		return bad("want SCHEME://HOST/OWNER/* (an owner to list)")
	}
	l.Host = key.Host()
	base := strings.TrimSuffix(fetch, "/x")
	i := strings.Index(base, "://")
	slash := strings.IndexByte(base[i+3:], '/')
	if slash < 0 {
		return bad("no owner to list")
	}
	l.Base, l.Owner = base[:i+3+slash], base[i+3+slash+1:]
	if l.Owner == "" || strings.Contains(l.Owner, "//") {
		return bad("no owner to list")
	}
	l.Pattern = l.Base + "/" + l.Owner + "/*"
	if l.Subgroups {
		l.Pattern += "*"
	}
	if l.Filter, err = parseFilter(attrs); err != nil {
		return bad("%v", err)
	}
	l.Attrs = maps.Clone(attrs)
	for _, a := range filterAttrs {
		delete(l.Attrs, a)
	}
	if l.Attrs == nil {
		l.Attrs = make(map[string]string, 1)
	}
	l.Attrs[AttrLister] = l.Pattern
	return l, nil
}

func truncateLine(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// parseFilter reads the filter attributes.
func parseFilter(attrs map[string]string) (Filter, error) {
	var f Filter
	for _, b := range []struct {
		name string
		no   *bool
	}{{AttrForks, &f.NoForks}, {AttrArchived, &f.NoArchived}} {
		v, ok := attrs[b.name]
		if !ok {
			continue
		}
		on, err := strconv.ParseBool(v)
		if err != nil {
			return Filter{}, fmt.Errorf("%s: %q is not true or false", b.name, v)
		}
		*b.no = !on
	}
	if v, ok := attrs[AttrMaxSize]; ok {
		n, err := config.ParseBytes(v)
		if err != nil {
			return Filter{}, fmt.Errorf("%s: %w", AttrMaxSize, err)
		}
		f.MaxSize = n
	}
	if v, ok := attrs[AttrTopics]; ok {
		if strings.HasPrefix(v, "[") {
			if err := json.Unmarshal([]byte(v), &f.Topics); err != nil {
				return Filter{}, fmt.Errorf("%s: want a list of topics: %w", AttrTopics, err)
			}
		} else if v != "" {
			f.Topics = []string{v}
		}
		for _, t := range f.Topics {
			if t == "" || len(t) > 50 {
				return Filter{}, fmt.Errorf("%s: %q is not a topic", AttrTopics, t)
			}
		}
	}
	return f, nil
}

// lineAttrs reads the attributes that follow a lister's URL on a .list
// line, as the content of a YAML flow mapping ("forks: false, topics: [a,
// b]").
func lineAttrs(f *fileData, line int, s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte("{"+s+"}"), &root); err != nil {
		_, msg := yamlError(err)
		return nil, fmt.Errorf("attributes after the lister: want key: value, ... (%s)", msg)
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("attributes after the lister: want key: value pairs")
	}
	m := root.Content[0]
	for _, n := range m.Content {
		n.Line = line
	}
	return yamlAttrs(f, m, func(k, _ *yaml.Node) bool {
		if k.Value != "url" {
			return false
		}
		f.problem(line, SeverityWarning, "", "url: after a lister is ignored")
		return true
	}), nil
}

// listerLine reads a .list file's lister line: the URL, then perhaps
// attributes.
func listerLine(f *fileData, line int, l string, opt repokey.Options) {
	raw, rest := l, ""
	if i := strings.IndexAny(l, " \t"); i >= 0 {
		raw, rest = l[:i], l[i+1:]
	}
	attrs, err := lineAttrs(f, line, strings.TrimSpace(rest))
	if err != nil {
		f.problem(line, SeverityError, "", fmt.Sprintf("lister %q: %v", truncateLine(repokey.Redact(raw)), err))
		return
	}
	addLister(f, line, raw, mergeAttrs(f.attrs, attrs), opt)
}

// addLister parses a lister line of f, or records its problem.
func addLister(f *fileData, line int, raw string, attrs map[string]string, opt repokey.Options) {
	l, err := parseLister(raw, attrs, opt)
	if err != nil {
		f.urlProblem(line, "", "", err)
		return
	}
	l.File, l.Line = f.name.path, line
	f.listers = append(f.listers, l)
}

// Listers returns the catalog's lister lines, one a pattern (the first by
// file and line), in that order.
func (c *Catalog) Listers() []Lister {
	var out []Lister
	c.files.each(func(f *fileData) { out = append(out, f.listers...) })
	return firstListers(out)
}

// firstListers sorts ls by file and line and keeps the first of each
// pattern.
func firstListers(ls []Lister) []Lister {
	slices.SortFunc(ls, func(a, b Lister) int { return compareLocations(a.File, a.Line, b.File, b.Line) })
	seen := make(map[string]bool, len(ls))
	return slices.DeleteFunc(ls, func(l Lister) bool {
		if seen[l.Pattern] {
			return true
		}
		seen[l.Pattern] = true
		return false
	})
}

// listerMark starts the path of a lister's synthetic file: no catalog
// path starts with it (it is not UTF-8), and it sorts after every one, so
// that a repository also written in the catalog keeps its own entry (the
// duplicate rule keeps the first by path).
const listerMark = "\xff\xfflister "

// ListerFile is the path of the synthetic file of pattern's entries.
func ListerFile(pattern string) string { return listerMark + pattern }

// WithListings returns the catalog with the entries of its listers'
// listings (by pattern: the repositories each lister's last good answer
// named), and what that changed. Each lister's repositories make one
// synthetic file, filtered by the lister's attributes; a lister without a
// listing (never answered yet) has no entries, and the entries of a
// lister no longer in the catalog go. A listed name that is not a
// repository below the lister's owner on its host is left out, with a
// problem on the lister's line (Problems). c is not modified.
func (c *Catalog) WithListings(listings map[string][]Listed) (*Catalog, Delta) {
	touched := make(map[string]*fileData)
	c.files.each(func(f *fileData) {
		if f.lister != nil {
			touched[f.name.path] = nil // dropped unless made again
		}
	})
	var sc scratch
	for _, l := range c.Listers() {
		repos, ok := listings[l.Pattern]
		if !ok {
			continue
		}
		path := ListerFile(l.Pattern)
		old := c.files.get(path)
		if old != nil && sameLister(*old.lister, l) && old.lister.File == l.File && old.lister.Line == l.Line && sameSlice(old.listedFrom, repos) {
			delete(touched, path) // the same listing of the same line: nothing to do
			continue
		}
		f := listingFile(l, repos, c.opt, &sc)
		if old != nil && sameListing(old, f) {
			delete(touched, path)
			continue
		}
		touched[path] = f
		if len(f.entries) == 0 && len(f.problems) == 0 {
			touched[path] = nil
		}
	}
	for p, f := range touched {
		if f == nil && c.files.get(p) == nil {
			delete(touched, p)
		}
	}
	if len(touched) == 0 {
		return c, Delta{}
	}
	delta, keyChanges := c.diffEntries(touched)
	next := &Catalog{commit: c.commit, opt: c.opt, files: c.files.with(touched), keys: c.keys.with(keyChanges), defaults: c.defaults}
	return next, delta
}

// AddListings is WithListings for a catalog just loaded, whose change
// nobody needs: it builds the key index of the whole catalog in one pass,
// as Load does, rather than work out a Delta entry by entry, so that a
// catalog half made of listings loads about as fast as a plain one.
func (c *Catalog) AddListings(listings map[string][]Listed) *Catalog {
	var kept, withEntries []*fileData
	c.files.each(func(f *fileData) {
		if f.lister == nil {
			kept = append(kept, f)
		}
	})
	// The listings are parsed in parallel, as Load parses files.
	listers := slices.DeleteFunc(c.Listers(), func(l Lister) bool { _, ok := listings[l.Pattern]; return !ok })
	made := make([]*fileData, len(listers))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(listers)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc scratch
			for i := int(next.Add(1) - 1); i < len(listers); i = int(next.Add(1) - 1) {
				made[i] = listingFile(listers[i], listings[listers[i].Pattern], c.opt, &sc)
			}
		}()
	}
	wg.Wait()
	for _, f := range made {
		if len(f.entries) > 0 || len(f.problems) > 0 {
			kept = append(kept, f)
		}
	}
	for _, f := range kept {
		if len(f.entries) > 0 {
			withEntries = append(withEntries, f)
		}
	}
	return &Catalog{commit: c.commit, opt: c.opt, files: newFileTable(kept), keys: buildKeyIndex(withEntries), defaults: c.defaults}
}

// sameListing tells whether two versions of a lister's file have the
// same entries, in order, with the same attributes.
func sameListing(a, b *fileData) bool {
	if len(a.entries) != len(b.entries) || len(a.problems) != len(b.problems) || !maps.Equal(a.attrs, b.attrs) {
		return false
	}
	for i, e := range a.entries {
		if e.key != b.entries[i].key || e.form != b.entries[i].form {
			return false
		}
	}
	return true
}

// listingFile makes the synthetic file of lister l's repositories: the
// URLs are written as a .list file's lines and parsed as one (the keys
// of a listing then cost what a catalog's do), and every key must be
// below the lister's owner on its host.
func listingFile(l Lister, repos []Listed, opt Options, sc *scratch) *fileData {
	f := &fileData{name: &fileName{ListerFile(l.Pattern)}, attrs: l.Attrs, listedFrom: repos}
	ll := l
	f.lister = &ll
	var data bytes.Buffer
	kept := make([]string, 0, len(repos))
	var refused []string
	for _, r := range repos {
		switch {
		case !plainName(r.Name):
			refused = append(refused, r.Name)
		case l.Filter.Keeps(r):
			kept = append(kept, r.Name)
		}
	}
	slices.Sort(kept)
	kept = slices.Compact(kept)
	for _, name := range kept {
		data.WriteString(l.Base)
		data.WriteByte('/')
		data.WriteString(name)
		data.WriteByte('\n')
	}
	keyOpt := repokey.Options{AllowPrivate: opt.AllowPrivate, Egress: opt.Egress, Fold: opt.Fold}
	parseListWith(f, data.Bytes(), keyOpt, sc)
	owner, _, err := repokey.Normalize(l.Base+"/"+l.Owner+"/x", keyOpt)
	prefix := strings.TrimSuffix(string(owner), "x")
	keep := func(e *entry) bool {
		k := string(e.key)
		if err != nil || !strings.HasPrefix(k, prefix) ||
			!l.Subgroups && strings.Contains(k[len(prefix):], "/") {
			refused = append(refused, k)
			return false
		}
		return true
	}
	n := 0
	for i, e := range f.entries {
		if keep(e) {
			f.entries[n], f.lines[n] = e, f.lines[i]
			n++
		}
	}
	f.entries, f.lines = f.entries[:n], f.lines[:n]
	bad := len(f.problems) + len(refused)
	f.problems = nil
	if bad > 0 {
		reason := fmt.Sprintf("lister %s: the forge named %d repositories that are not below %s on %s; left out", l.Pattern, bad, l.Owner, l.Host)
		if len(refused) > 0 {
			reason += fmt.Sprintf(" (the first: %q)", truncateLine(refused[0]))
		}
		f.problems = []Problem{{File: l.File, Line: l.Line, Reason: reason, Severity: SeverityWarning}}
	}
	return f
}

// plainName says whether a listed name is made of what a forge's
// repository paths are (ASCII letters, digits, '.', '_', '-' and '/'),
// and so can be written as a line of a .list file and nothing more.
func plainName(s string) bool {
	if s == "" || len(s) > repokey.MaxKeyLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

// Then is d followed by e (a change of the catalog that d changed to):
// what changed from before d to after e, by key.
func (d Delta) Then(e Delta) Delta {
	if len(e.Added)+len(e.Removed)+len(e.Changed) == 0 {
		return d
	}
	type state struct {
		kind  byte // 'a', 'r', 'c'
		entry Entry
	}
	m := make(map[repokey.Key]state)
	for _, x := range d.Added {
		m[x.Key] = state{'a', x}
	}
	for _, x := range d.Removed {
		m[x.Key] = state{'r', x}
	}
	for _, x := range d.Changed {
		m[x.Key] = state{'c', x}
	}
	for _, x := range e.Added {
		if s, ok := m[x.Key]; ok && s.kind == 'r' {
			m[x.Key] = state{'c', x} // removed, then back: changed
		} else {
			m[x.Key] = state{'a', x}
		}
	}
	for _, x := range e.Removed {
		s, ok := m[x.Key]
		switch {
		case ok && s.kind == 'a':
			delete(m, x.Key) // added, then gone: nothing
		default:
			m[x.Key] = state{'r', x}
		}
	}
	for _, x := range e.Changed {
		if s, ok := m[x.Key]; ok && s.kind == 'a' {
			m[x.Key] = state{'a', x}
		} else {
			m[x.Key] = state{'c', x}
		}
	}
	var out Delta
	for _, s := range m {
		switch s.kind {
		case 'a':
			out.Added = append(out.Added, s.entry)
		case 'r':
			out.Removed = append(out.Removed, s.entry)
		default:
			out.Changed = append(out.Changed, s.entry)
		}
	}
	for _, es := range [][]Entry{out.Added, out.Removed, out.Changed} {
		slices.SortFunc(es, func(a, b Entry) int { return cmp.Compare(a.Key, b.Key) })
	}
	return out
}

// diffListers compares the lister lines of the files being replaced with
// those of their new versions (nil: removed).
func (c *Catalog) diffListers(files map[string]*fileData) (added, removed []Lister) {
	for path, nf := range files {
		var olds, news []Lister
		if of := c.files.get(path); of != nil {
			olds = of.listers
		}
		if nf != nil {
			news = nf.listers
		}
		same := sameLister
		for _, o := range olds {
			if !slices.ContainsFunc(news, func(n Lister) bool { return same(o, n) }) {
				removed = append(removed, o)
			}
		}
		for _, n := range news {
			if !slices.ContainsFunc(olds, func(o Lister) bool { return same(o, n) }) {
				added = append(added, n)
			}
		}
	}
	byPlace := func(a, b Lister) int { return compareLocations(a.File, a.Line, b.File, b.Line) }
	slices.SortFunc(added, byPlace)
	slices.SortFunc(removed, byPlace)
	return added, removed
}

// sameLister tells whether two lister lines list the same way (where
// they are written does not matter).
func sameLister(a, b Lister) bool {
	return a.Pattern == b.Pattern && maps.Equal(a.Attrs, b.Attrs) && a.Filter.NoForks == b.Filter.NoForks &&
		a.Filter.NoArchived == b.Filter.NoArchived && a.Filter.MaxSize == b.Filter.MaxSize && slices.Equal(a.Filter.Topics, b.Filter.Topics)
}

// sameSlice tells whether a and b are the same slice (not only equal): a
// caller that keeps its listings passes the same slice until it lists
// again, and a catalog update then costs nothing per listed repository.
func sameSlice(a, b []Listed) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
