// Package console is the operator's web console that the full node serves:
// the overview at / and the pages under /-/ (repositories, one
// repository, nodes, tasks, catalog), and for everyone a repository's
// public status (/-/status/{key}) and its badge (/-/badge/{key}.svg).
// Pages are rendered on the server with html/template from embedded
// templates, charts as inline SVG; one embedded script does the operator's
// actions by calling the JSON API with the token the operator typed (kept
// in the browser's session storage, never in a URL), and keeps the pages
// live: on the full node's event stream it fetches the page again and
// swaps its live parts. Without the script every page still works.
//
// It holds no state of its own and does no fleet work: every figure comes
// from the Source the full node provides, which answers from counters
// kept as states change, from its series of figures over time (package
// series) and from listings that cost a page, never a walk of every
// repository. Reads are public, so error texts are shown as their public
// classes only (api.PublicError: the class the node that failed said). Everything shown came from strangers
// (keys, URLs, errors) and is escaped by html/template.
package console

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/series"
)

// Source is what the full node knows, as the console needs it.
type Source interface {
	// Repos returns one page of the repositories that q selects.
	Repos(ctx context.Context, q Query) Page
	// GetRepo returns one repository in detail (its refs read from disk).
	GetRepo(ctx context.Context, key string) (Detail, bool)
	// Log returns a page of limit entries of key's fetch log, newest
	// first, from after the cursor before ("": the newest), and the
	// cursor of the next page ("": none).
	Log(ctx context.Context, key, before string, limit int) ([]fetchlog.Entry, string, error)
	// Status returns what the public status of key shows, cheaply: no
	// git, no log.
	Status(key string) (api.Repo, bool)
	// Nodes lists the fleet's nodes.
	Nodes(ctx context.Context) ([]api.Node, error)
	// Catalog describes the applied catalog and a held purge.
	Catalog(ctx context.Context) (api.CatalogStatus, error)
	// Overview returns the figures of the overview, from counters, with
	// the figures over r in ChartPoints points.
	Overview(r series.Range) Overview
	// Tunnels lists the nodes with a tunnel open to this full node.
	Tunnels() []uint32
	// Feeds are the forges' change feeds as the coordinator last said.
	Feeds() []api.FeedStatus
}

// Query selects repositories for a page of /-/repos. Zero values match
// everything.
type Query struct {
	Search  string           // a substring of the key (case-insensitive)
	State   *repostate.State // nil: any
	Owner   uint32
	Network string // a fork network's members ("": any)
	// StaleOver keeps the repositories verified against their upstreams
	// (verified_at) longer ago than this (or never), the stalest first;
	// Never keeps only those never verified.
	StaleOver time.Duration
	Never     bool
	Offset    int
	Limit     int
}

// Detail is one repository in detail: what the API shows of it, the
// fallback URLs of its catalog entry, and what the full node knows of its
// copy and its schedule.
type Detail struct {
	api.RepoDetail
	Fallbacks []string
	// RefTimes are the committer dates of the refs' tips (unix seconds),
	// read with the refs.
	RefTimes map[string]int64
	// Size is the size on disk of the full node's copy in bytes (-1: none).
	Size int64
	// NextCheck is when the full node checks it next, if it owns it
	// (zero: another node's schedule says).
	NextCheck time.Time
	// LastSuccess is the newest work on it in the log that succeeded
	// (zero: none there).
	LastSuccess time.Time
}

// Page is one page of repositories.
type Page struct {
	Repos []api.Repo
	// Total is how many match in all, or -1 when the listing stopped at
	// the page without counting (a search, a staleness filter).
	Total int
	// More tells whether there are more after this page.
	More bool
}

// Overview is what the overview shows at a glance.
type Overview struct {
	Total, Current int
	ByState        map[repostate.State]int
	// Staleness is the distribution of the time since each repository's
	// verified_at, in the order of StaleBuckets, then those never verified.
	Staleness []int
	// Errors counts repositories by the public class of their last error.
	Errors map[string]int
	// Fetching are the repositories being pulled now (a bounded list) and
	// how many in all.
	Fetching      []string
	FetchingTotal int
	// Trend is the figures over the range asked, oldest first, up to now,
	// in at most ChartPoints points.
	Trend   []series.Bucket
	Tunnels int
}

// StaleBuckets are the bounds of the staleness distribution: a repository
// falls in the first bucket whose bound its staleness does not exceed, or
// in one past the last.
var StaleBuckets = []time.Duration{10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// Console serves the pages. It is an http.Handler.
type Console struct {
	src   Source
	log   *slog.Logger
	clk   clock.Clock
	pages map[string]*template.Template
	mux   *http.ServeMux
}

//go:embed assets
var assets embed.FS

// New returns a console over src.
func New(src Source, log *slog.Logger, clk clock.Clock) *Console {
	c := &Console{src: src, log: log, clk: clk, pages: parsePages(), mux: http.NewServeMux()}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	files := http.StripPrefix("/-/static/", http.FileServerFS(static))
	c.mux.Handle("GET /-/static/", files)
	c.mux.HandleFunc("GET /{$}", c.overview)
	c.mux.HandleFunc("GET /-/{$}", c.overview)
	c.mux.HandleFunc("GET /-/repos", c.repos)
	c.mux.HandleFunc("GET /-/repos/{key...}", c.repo)
	c.mux.HandleFunc("GET /-/nodes", c.nodes)
	c.mux.HandleFunc("GET /-/tasks", c.tasks)
	c.mux.HandleFunc("GET /-/catalog", c.catalog)
	c.mux.HandleFunc("GET /-/status/{key...}", c.status)
	c.mux.HandleFunc("GET /-/badge/{key...}", c.badge)
	c.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console is read-only: actions go to /api/v1/", http.StatusMethodNotAllowed)
			return
		}
		c.render(w, r, http.StatusNotFound, "notfound", "Not found", nil)
	})
	return c
}

// csp allows only the console's own script, styles and API calls: no
// inline script, nothing from the network.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}
