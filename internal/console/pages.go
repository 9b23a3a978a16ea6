package console

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/humanize"
)

// pageNames are the templates of the pages, each a file in assets/ that
// defines "content" for assets/layout.html.
var pageNames = []string{"overview", "repos", "repo", "nodes", "tasks", "catalog", "notfound"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"publicError": api.PublicError,
		"repoHref":    repoHref,
		"ago":         ago,
		"staleness":   staleness,
		"bytes":       humanize.Bytes,
		"percent":     percent,
		"bar":         bar,
		"short":       func(s string) string { return s[:min(len(s), 12)] },
		"add":         func(a, b int) int { return a + b },
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
	v := view{Title: title, Nav: nav, Now: c.clk.Now(), Data: data, Banner: c.banner(r.Context())}
	if err := c.pages[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		c.log.Error("console: render", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "the console could not render this page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
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
	msg := "The catalog cannot be read (" + api.PublicError(cat.Error) + ")"
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

// timeout bounds what a page waits for the coordinator.
const timeout = 5 * time.Second

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	ov := c.src.Overview()
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
		Fresh      freshChart
		Nodes      []count
		NodesError string
		Held       *api.PendingPurge
		CatError   string
	}{Overview: ov, States: counts(ov.ByState), Errors: counts(ov.Errors), Stale: st, Fresh: chart(ov.Freshness, ov.Current, ov.Total)}
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
	q := Query{Search: strings.TrimSpace(qv.Get("q")), State: qv.Get("state"), Limit: pageSize}
	if len(q.Search) > 256 {
		c.badRequest(w, r, "the search is longer than 256 bytes")
		return
	}
	if s := qv.Get("owner"); s != "" {
		id, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			c.badRequest(w, r, fmt.Sprintf("owner %q: want a node ID", s))
			return
		}
		q.Owner = uint32(id)
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
	page := c.src.Repos(q)
	link := func(offset int) string {
		v := url.Values{}
		for _, k := range []string{"q", "state", "owner", "stale", "limit"} {
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
		States     []string
	}{Query: q, Stale: qv.Get("stale"), Page: page, First: q.Offset + 1, States: []string{"ok", "failing", "pending", "unplaceable", "corrupt", "repairing", "unchecked"}}
	if q.Offset > 0 {
		data.Prev = link(max(q.Offset-q.Limit, 0))
	}
	if page.More {
		data.Next = link(q.Offset + q.Limit)
	}
	c.render(w, r, http.StatusOK, "repos", "Repositories", data)
}

func (c *Console) repo(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	d, ok := c.src.GetRepo(key)
	if !ok {
		c.render(w, r, http.StatusNotFound, "notfound", "Not found", fmt.Sprintf("repository %s is not mirrored", key))
		return
	}
	if d.CloneURL == "" { // no --public-url: as the client reached us
		d.CloneURL = "http://" + r.Host + "/" + d.Key + ".git"
	}
	refs := make([]count, 0, len(d.Refs))
	for name := range d.Refs {
		refs = append(refs, count{Name: name})
	}
	slices.SortFunc(refs, func(a, b count) int { return strings.Compare(a.Name, b.Name) })
	attrs := make([]string, 0, len(d.Attrs))
	for k := range d.Attrs {
		attrs = append(attrs, k)
	}
	slices.Sort(attrs)
	data := struct {
		Detail
		RefNames []count
		AttrKeys []string
		APIPath  string
	}{Detail: d, RefNames: refs, AttrKeys: attrs, APIPath: "/api/v1/repos/" + escapeKey(d.Key)}
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
