package console

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/humanize"
	"github.com/gitfleet/gitfleet/internal/network"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// pageNames are the templates of the pages, each a file in assets/ that
// defines "content" for assets/layout.html.
var pageNames = []string{"overview", "repos", "repo", "nodes", "tasks", "catalog", "status", "notfound"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"publicError":     api.PublicError,
		"publicErrorText": api.PublicErrorText,
		"publicURL":       api.PublicCatalogURL,
		"repoHref":        repoHref,
		"ago":             ago,
		"until":           until,
		"iso":             iso,
		"staleness":       staleness,
		"bytes":           bytesOf,
		"num":             num,
		"plural":          plural,
		"percent":         percent,
		"bar":             bar,
		"short":           func(s string) string { return s[:min(len(s), 12)] },
		"add":             func(a, b int) int { return a + b },
		"transition":      transition,
	}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html"))
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		pages[name] = template.Must(template.Must(layout.Clone()).ParseFS(assets, "assets/"+name+".html"))
	}
	return pages
}

// view is what the layout gets: the page's title, its section for the
// navigation, the page's own data, and a banner every page shows (a
// catalog that cannot be read; "" for none).
type view struct {
	Title  string
	Nav    string
	Now    time.Time
	Data   any
	Banner string
}

// render executes a page into a buffer first, so that a template error
// answers 500 rather than half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	var buf bytes.Buffer
	nav, _, _ := strings.Cut(name, "/")
	v := view{Title: title, Nav: nav, Now: c.clk.Now(), Data: data}
	if name != "status" {
		// The public status page is for a project's visitors, not the
		// operator: it says nothing of the catalog.
		v.Banner = c.banner(r.Context())
	}
	if err := c.pages[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		c.log.Error("console: render", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "the console could not render this page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	if h.Get("Cache-Control") == "" || status != http.StatusOK {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client has gone if this fails
}

// banner is what every page says of a catalog that cannot be read, ""
// when it can (or the coordinator does not answer: the pages that need it
// say so). Reads are public: the error's class only, the text is the
// operator's (ctl catalog, the API with the token).
func (c *Console) banner(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cat, err := c.src.Catalog(ctx)
	if err != nil || cat.Error == "" {
		return ""
	}
	msg := "The catalog cannot be read (" + api.PublicError(cat.Error, cat.ErrorClass) + ")"
	if cat.ErrorAt != nil {
		msg += " since " + cat.ErrorAt.UTC().Format("2006-01-02 15:04 MST")
	}
	if cat.Commit == "" {
		msg += ": no repository is mirrored until it can be."
	} else {
		msg += ": the last good commit " + cat.Commit[:min(len(cat.Commit), 12)] + " stays applied."
	}
	return msg + " gitfleet ctl catalog, with the API token, says why."
}

// badRequest answers a page that says what was wrong with the request.
func (c *Console) badRequest(w http.ResponseWriter, r *http.Request, msg string) {
	c.render(w, r, http.StatusBadRequest, "notfound", "Bad request", msg)
}

// count is one line of a breakdown.
type count struct {
	Name string
	N    int
}

// counts orders m by count, largest first, then by name.
func counts(m map[string]int) []count {
	out := make([]count, 0, len(m))
	for k, n := range m {
		out = append(out, count{k, n})
	}
	slices.SortFunc(out, func(a, b count) int { return cmp.Or(cmp.Compare(b.N, a.N), strings.Compare(a.Name, b.Name)) })
	return out
}

// stateCounts are the repositories by state, most first.
func stateCounts(m map[repostate.State]int) []count {
	byName := make(map[string]int, len(m))
	for s, n := range m {
		byName[s.String()] = n
	}
	return counts(byName)
}

// timeout bounds what a page waits for the coordinator.
const timeout = 5 * time.Second

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("range")
	if name == "" {
		name = "day"
	}
	rng, ok := ranges[name]
	if !ok {
		c.badRequest(w, r, fmt.Sprintf("range %q: want day or week", name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	ov := c.src.Overview(rng)
	type stale struct {
		Label string
		N     int
		Href  string
	}
	var st []stale
	for i, n := range ov.Staleness {
		s := stale{N: n}
		switch {
		case i == 0:
			s.Label = "under " + fmtDuration(StaleBuckets[0])
		case i < len(StaleBuckets):
			s.Label = fmtDuration(StaleBuckets[i-1]) + " to " + fmtDuration(StaleBuckets[i])
			s.Href = "/-/repos?stale=" + fmtDuration(StaleBuckets[i-1])
		case i == len(StaleBuckets):
			s.Label = "over " + fmtDuration(StaleBuckets[i-1])
			s.Href = "/-/repos?stale=" + fmtDuration(StaleBuckets[i-1])
		default:
			s.Label, s.Href = "never verified", "/-/repos?stale=never"
		}
		st = append(st, s)
	}
	data := struct {
		Overview
		States     []count
		Errors     []count
		Stale      []stale
		MaxStale   int
		Trends     trends
		Nodes      []count
		NodesError string
		Held       *api.PendingPurge
		CatError   string
	}{Overview: ov, States: stateCounts(ov.ByState), Errors: counts(ov.Errors), Stale: st, Trends: trendsOf(rng, ov.Trend, ov.Current, ov.Total)}
	for _, s := range st {
		data.MaxStale = max(data.MaxStale, s.N)
	}
	if nodes, err := c.src.Nodes(ctx); err != nil {
		data.NodesError = "the coordinator is out of reach"
	} else {
		by := map[string]int{}
		for _, n := range nodes {
			by[n.State]++
		}
		data.Nodes = counts(by)
	}
	if cat, err := c.src.Catalog(ctx); err != nil {
		data.CatError = "the coordinator is out of reach"
	} else {
		data.Held = cat.Pending
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", data)
}

// pageSize is the default number of repositories a page lists; maxPage the
// most a request may ask for.
const (
	pageSize = 50
	maxPage  = 500
)

func (c *Console) repos(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	q := Query{Search: strings.TrimSpace(qv.Get("q")), Limit: pageSize}
	if len(q.Search) > 256 {
		c.badRequest(w, r, "the search is longer than 256 bytes")
		return
	}
	if s := qv.Get("state"); s != "" {
		st, err := repostate.Parse(s)
		if err != nil {
			c.badRequest(w, r, err.Error())
			return
		}
		q.State = &st
	}
	if s := qv.Get("owner"); s != "" {
		id, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			c.badRequest(w, r, fmt.Sprintf("owner %q: want a node ID", s))
			return
		}
		q.Owner = uint32(id)
	}
	if s := strings.TrimSpace(qv.Get("network")); s != "" {
		if err := network.CheckAnyName(s); err != nil {
			c.badRequest(w, r, err.Error())
			return
		}
		q.Network = s
	}
	if s := qv.Get("stale"); s != "" {
		if s == "never" {
			q.Never = true
		} else {
			d, err := parseDuration(s)
			if err != nil || d <= 0 {
				c.badRequest(w, r, fmt.Sprintf("stale %q: want a duration such as 30m, 6h or 7d, or never", s))
				return
			}
			q.StaleOver = d
		}
	}
	for name, p := range map[string]*int{"offset": &q.Offset, "limit": &q.Limit} {
		if s := qv.Get(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || name == "limit" && (n == 0 || n > maxPage) {
				c.badRequest(w, r, fmt.Sprintf("%s %q: want a number (limit: 1 to %d)", name, s, maxPage))
				return
			}
			*p = n
		}
	}
	page := c.src.Repos(r.Context(), q)
	link := func(offset int) string {
		v := url.Values{}
		for _, k := range []string{"q", "state", "owner", "network", "stale", "limit"} {
			if s := qv.Get(k); s != "" {
				v.Set(k, s)
			}
		}
		if offset > 0 {
			v.Set("offset", strconv.Itoa(offset))
		}
		return "/-/repos?" + v.Encode()
	}
	data := struct {
		Query
		Stale      string
		Page       Page
		First      int
		Prev, Next string
		State      string   // the filter's, shadowing Query's
		States     []string // every state, as the filter offers them
	}{Query: q, Stale: qv.Get("stale"), Page: page, First: q.Offset + 1, State: qv.Get("state")}
	for _, s := range repostate.All() {
		data.States = append(data.States, s.String())
	}
	if q.Offset > 0 {
		data.Prev = link(max(q.Offset-q.Limit, 0))
	}
	if page.More {
		data.Next = link(q.Offset + q.Limit)
	}
	c.render(w, r, http.StatusOK, "repos", "Repositories", data)
}

// logPage is how many entries of its log a repository's page shows.
const logPage = 25

// refRow is one ref a repository's page lists.
type refRow struct {
	Name, ID string
	Date     time.Time // its tip's committer date (zero: unknown)
}

// logRow is one entry of a repository's log, with the refs it changed.
type logRow struct {
	fetchlog.Entry
	Moves []move
	// Unnamed counts the refs changed that the entry does not name.
	Unnamed int
}

// move is a ref an entry changed, with short IDs ("" : none; an old ID
// that a rewrite left is "(rewritten)": see api.PublicEntry).
type move struct{ Ref, Old, New string }

func shortID(id string) string { return id[:min(len(id), 10)] }

func (c *Console) repo(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	before := r.URL.Query().Get("before")
	if len(before) > 100 || strings.ContainsAny(before, "\x00/") {
		c.badRequest(w, r, "before: not a cursor of this log (follow the page's link to older entries)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	d, ok := c.src.GetRepo(ctx, key)
	if !ok {
		c.render(w, r, http.StatusNotFound, "notfound", "Not found", repostate.NotMirrored(key))
		return
	}
	if d.CloneURL == "" { // no --public-url: as the client reached us
		d.CloneURL = "http://" + r.Host + "/" + d.Key + ".git"
	}
	refs := make([]refRow, 0, len(d.Refs))
	for name, id := range d.Refs {
		row := refRow{Name: name, ID: id}
		if t := d.RefTimes[name]; t > 0 {
			row.Date = time.Unix(t, 0).UTC()
		}
		refs = append(refs, row)
	}
	slices.SortFunc(refs, func(a, b refRow) int { return strings.Compare(a.Name, b.Name) })
	attrs := make([]string, 0, len(d.Attrs))
	for k := range d.Attrs {
		attrs = append(attrs, k)
	}
	slices.Sort(attrs)
	entries, next, logErr := c.src.Log(ctx, d.Key, before, logPage)
	rows := make([]logRow, 0, len(entries))
	for _, full := range entries {
		e := api.PublicEntry(full) // an old tip a rewrite left is the operator's
		row := logRow{Entry: e}
		for i, m := range e.Moves {
			old := shortID(m.Old)
			if old == "" && full.Moves[i].Old != "" {
				old = "(rewritten)"
			}
			row.Moves = append(row.Moves, move{Ref: m.Ref, Old: old, New: shortID(m.New)})
		}
		if len(e.Moves) == 0 {
			for _, name := range e.Refs {
				row.Moves = append(row.Moves, move{Ref: name})
			}
		}
		row.Unnamed = max(e.RefsChanged-len(row.Moves), 0)
		rows = append(rows, row)
	}
	data := struct {
		Detail
		Refs       []refRow
		AttrKeys   []string
		APIPath    string
		Log        []logRow
		LogError   string
		Older      string // the next page of the log ("": none)
		Paged      bool   // the log shown is not its newest page
		LogAPI     string // the same page of the log in the API
		StatusPage string
	}{Detail: d, Refs: refs, AttrKeys: attrs, APIPath: "/api/v1/repos/" + escapeKey(d.Key), Log: rows, Paged: before != "",
		StatusPage: "/-/status/" + escapeKey(d.Key)}
	q := url.Values{"limit": {strconv.Itoa(logPage)}}
	if before != "" {
		q.Set("before", before)
	}
	data.LogAPI = data.APIPath + "/log?" + q.Encode()
	if logErr != nil {
		data.LogError = "the log cannot be read now"
	}
	if next != "" {
		data.Older = repoHref(d.Key) + "?" + url.Values{"before": {next}}.Encode()
	}
	c.render(w, r, http.StatusOK, "repo", d.Key, data)
}

func (c *Console) nodes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	nodes, err := c.src.Nodes(ctx)
	data := struct {
		Nodes   []api.Node
		Tunnels map[uint32]bool
		Error   string
	}{Nodes: nodes, Tunnels: map[uint32]bool{}}
	for _, id := range c.src.Tunnels() {
		data.Tunnels[id] = true
	}
	if err != nil {
		data.Error = "the coordinator is out of reach; try again in a few seconds"
	}
	slices.SortFunc(data.Nodes, func(a, b api.Node) int { return cmp.Compare(a.ID, b.ID) })
	c.render(w, r, http.StatusOK, "nodes", "Nodes", data)
}

func (c *Console) tasks(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "tasks", "Tasks", nil)
}

func (c *Console) catalog(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	cat, err := c.src.Catalog(ctx)
	data := struct {
		api.CatalogStatus
		Error string
	}{CatalogStatus: cat}
	if err != nil {
		data.Error = "the coordinator is out of reach; try again in a few seconds"
	}
	c.render(w, r, http.StatusOK, "catalog", "Catalog", data)
}

// escapeKey escapes each segment of a key for a URL path.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// repoHref is the console's page of a repository.
func repoHref(key string) string { return "/-/repos/" + escapeKey(key) }

// parseDuration is time.ParseDuration that also takes days ("7d").
func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days > 3650 {
			return 0, errors.New("bad number of days")
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// fmtDuration writes d shortly: 10m, 6h, 7d.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.Round(time.Second).String()
}

// ago is how long before now t (a time.Time or *time.Time) was, shortly
// ("never" for none).
func ago(now time.Time, t any) string {
	var at time.Time
	switch t := t.(type) {
	case time.Time:
		at = t
	case *time.Time:
		if t != nil {
			at = *t
		}
	}
	if at.IsZero() {
		return "never"
	}
	return roughly(now.Sub(at)) + " ago"
}

// staleness writes a staleness in seconds shortly.
func staleness(s float64) string {
	if s <= 0 {
		return "–"
	}
	return roughly(time.Duration(s * float64(time.Second)))
}

func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return fmt.Sprintf("%dd", d/(24*time.Hour))
}

func percent(n, of int) string {
	if of == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// barWidth is the width in pixels of a full bar.
const barWidth = 160

// bar is the width of n's bar against the largest, at least one pixel
// when n is not zero.
func bar(n, largest int) int {
	if n <= 0 || largest <= 0 {
		return 0
	}
	return max(1, n*barWidth/largest)
}

// iso writes a time (a time.Time or *time.Time) in UTC as ISO 8601, to
// the second ("never" for none).
func iso(t any) string {
	at := timeOf(t)
	if at.IsZero() {
		return "never"
	}
	return at.UTC().Format("2006-01-02T15:04:05Z")
}

func timeOf(t any) time.Time {
	switch t := t.(type) {
	case time.Time:
		return t
	case *time.Time:
		if t != nil {
			return *t
		}
	}
	return time.Time{}
}

// until is how long after now t is, shortly ("now" once it is past).
func until(now time.Time, t any) string {
	at := timeOf(t)
	if !at.After(now) {
		return "now"
	}
	return "in " + roughly(at.Sub(now))
}

// num writes an integer with its thousands separated.
func num(v any) string {
	if n, ok := integer(v); ok {
		return humanize.Count(n)
	}
	return fmt.Sprint(v)
}

// plural writes n and the noun that fits it.
func plural(v any, one, many string) string {
	n, _ := integer(v)
	return humanize.Plural(n, one, many)
}

func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(min(n, math.MaxInt64)), true
	}
	return 0, false
}

// transition writes a node's change of state; its first, from the state
// before any (unknown), is its joining.
func transition(t api.Transition) string {
	switch {
	case t.From != "" && t.From != "unknown":
		return t.From + " → " + t.To
	case t.To == "alive":
		return "joined"
	}
	return "joined, " + t.To
}

// bytesOf writes a size in bytes (any integer) in binary units.
func bytesOf(v any) string {
	n, _ := integer(v)
	return humanize.Bytes(uint64(max(n, 0)))
}
