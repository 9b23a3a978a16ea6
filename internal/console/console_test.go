package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/series"
)

// hostile is a key and an error text as strangers could make them: markup
// that must come out escaped, and a detail (a private address and port)
// that only the operator may see.
const (
	hostileKey   = `example.org/a/<script>alert(1)</script>"'`
	hostileError = `git fetch http://10.0.0.5:6379/a.git: network: Failed to connect to 10.0.0.5 port 6379: Connection refused <img src=x onerror=alert(2)>`
)

// fakeSource is a Source with fixed answers; it records the last query.
type fakeSource struct {
	repos    []api.Repo
	nodes    []api.Node
	nodesErr error
	catalog  api.CatalogStatus
	last     Query
	// The figures over time: what was recorded in a series.
	trend     *series.Series
	lastRange series.Range
	// The log of every repository: 60 entries, newest first.
	log        []fetchlog.Entry
	lastBefore string
	// total, if set, is the count of a listing (else it does not count).
	total *int
	feeds []api.FeedStatus
}

func (s *fakeSource) Repos(_ context.Context, q Query) Page {
	s.last = q
	if s.total != nil {
		return Page{Repos: s.repos[:min(*s.total, len(s.repos))], Total: *s.total, More: *s.total > len(s.repos)}
	}
	return Page{Repos: s.repos, Total: -1, More: true}
}

func (s *fakeSource) GetRepo(_ context.Context, key string) (Detail, bool) {
	for _, r := range s.repos {
		if r.Key == key {
			at := time.Unix(1e9, 0).UTC()
			return Detail{RepoDetail: api.RepoDetail{Repo: r, Attrs: map[string]string{"note": "<b>bold</b>"},
				Refs:    map[string]string{"refs/heads/<evil>": "0123456789abcdef0123456789abcdef01234567"},
				History: []api.HistoryEntry{{At: at, Kind: "check", Node: 2, Error: hostileError, ErrorClass: unreachable}}, Checks: 1, Fetches: 1},
				Fallbacks: []string{"https://mirror.example/<x>.git"},
				RefTimes:  map[string]int64{"refs/heads/<evil>": 1e9 - 86400}, Size: 5 << 20,
				LastSuccess: at.Add(-time.Hour)}, true
		}
	}
	return Detail{}, false
}

func (s *fakeSource) Log(_ context.Context, key, before string, limit int) ([]fetchlog.Entry, string, error) {
	s.lastBefore = before
	i := 0
	if before != "" {
		i = slices.IndexFunc(s.log, func(e fetchlog.Entry) bool { return e.ID == before }) + 1
	}
	page := s.log[i:min(i+limit, len(s.log))]
	next := ""
	if i+limit < len(s.log) {
		next = page[len(page)-1].ID
	}
	return page, next, nil
}

func (s *fakeSource) Status(key string) (api.Repo, bool) {
	for _, r := range s.repos {
		if r.Key == key {
			return r, true
		}
	}
	return api.Repo{}, false
}

func (s *fakeSource) Nodes(context.Context) ([]api.Node, error) { return s.nodes, s.nodesErr }

func (s *fakeSource) Catalog(context.Context) (api.CatalogStatus, error) { return s.catalog, nil }

func (s *fakeSource) Overview(r series.Range) Overview {
	s.lastRange = r
	return Overview{Total: 3, Current: 2, ByState: map[repostate.State]int{repostate.OK: 2, repostate.Failing: 1},
		Staleness: []int{1, 1, 0, 0, 0, 0, 1}, Errors: map[string]int{unreachable: 1},
		Fetching: []string{hostileKey}, FetchingTotal: 1, Trend: s.trend.Window(r, testNow, ChartPoints), Tunnels: 1}
}

func (s *fakeSource) Tunnels() []uint32 { return []uint32{2} }

func (s *fakeSource) Feeds() []api.FeedStatus { return s.feeds }

// unreachable is the public class of hostileError.
var unreachable = repostate.ClassUnreachable.String()

// testNow is the console's clock in the tests.
var testNow = time.Unix(1e9+3600, 0)

func newTestConsole() (*Console, *fakeSource) {
	src := &fakeSource{
		repos: []api.Repo{{Key: hostileKey, State: repostate.Failing, Owner: 2, LastError: hostileError, ErrorClass: repostate.ClassUnreachable, UpstreamURL: "https://" + hostileKey},
			{Key: "github.com/a/b", State: repostate.OK, Owner: 2, Current: true}},
		nodes: []api.Node{{ID: 2, Name: `<i>node</i>`, Mode: "partial", State: "alive", Capacity: 1, EffectiveWeight: 1,
			History: []api.Transition{{From: "unknown", To: "alive", At: time.Unix(1e9-60, 0)}, {From: "suspect", To: "alive", At: time.Unix(1e9, 0)}}},
			{ID: 1, Name: "full", Mode: "full", State: "alive"}},
		catalog: api.CatalogStatus{Commit: "c0ffee", Repos: 3, Problems: 2, ProblemLines: []string{"lists/a.list:3: <b>not a URL</b>"}},
		trend:   series.New(),
	}
	// An hour of figures: the share current going from 1 of 3 to 2 of 3.
	for i := range 60 {
		at := testNow.Add(time.Duration(i-60) * time.Minute)
		src.trend.Count(at, series.Counts{Checks: 3, Fetches: 1, ServedBytes: 1 << 20})
		src.trend.Sample(at, series.Gauges{DiskUsed: 1 << 30, Current: uint64(1 + i/30), Total: 3})
	}
	for i := range 60 {
		e := fetchlog.Entry{ID: fmt.Sprintf("e%02d", i), Key: "github.com/a/b", At: testNow.Add(-time.Duration(i) * time.Minute).UTC(),
			Kind: "pull", Node: 1, From: 2, Result: fetchlog.ResultOK, Changed: true, RefsChanged: 1, Refs: []string{"refs/heads/main"},
			Moves: []fetchlog.Move{{Ref: "refs/heads/main", Old: "1111111111aaaa", New: "2222222222bbbb"}}}
		if i == 1 {
			e.Result, e.Error, e.Changed, e.Refs, e.Moves, e.RefsChanged = fetchlog.ResultFailed, hostileError, false, nil, nil, 0
		}
		src.log = append(src.log, e)
	}
	return New(src, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.NewFake(testNow)), src
}

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	resp := w.Result()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestEveryPageRendersWithHostileKeysAndErrorsEscaped(t *testing.T) {
	c, _ := newTestConsole()
	for _, path := range []string{"/", "/-/", "/?range=week", "/-/repos", "/-/repos?q=script", "/-/repos/" + hostileKey, "/-/nodes", "/-/tasks", "/-/catalog", "/-/status/" + hostileKey} {
		resp, body := get(t, c, path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", path, resp.StatusCode, body)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		for _, bad := range []string{"<script>alert", "<img src=x", "<b>bold", "<i>node", "<evil>", "6379", "10.0.0.5"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s: the page holds %q unescaped or undisclosed:\n%s", path, bad, body)
			}
		}
		if strings.Contains(body, "<script>") {
			t.Errorf("GET %s: an inline script:\n%s", path, body)
		}
	}
}

func TestPublicPagesShowTheErrorClass(t *testing.T) {
	c, _ := newTestConsole()
	for _, path := range []string{"/-/repos", "/-/repos/" + hostileKey, "/"} {
		if _, body := get(t, c, path); !strings.Contains(body, unreachable) {
			t.Errorf("GET %s does not show the class %q:\n%s", path, unreachable, body)
		}
	}
}

// The old tip that a force-push left is the operator's: a repository's
// page, which anyone reads, shows the move as rewritten, without the old
// ID, and a fast-forward's old ID as before.
func TestARepositorysPageDoesNotShowTheOldTipOfAForcePush(t *testing.T) {
	c, src := newTestConsole()
	old := "4444444444cccc" + strings.Repeat("0", 26)
	src.log[0].Moves = append(src.log[0].Moves, fetchlog.Move{Ref: "refs/heads/rewritten", Old: old, New: "5555555555dddd"})
	src.log[0].Rewrites = []fetchlog.Rewrite{{Ref: "refs/heads/rewritten", Old: old, New: "5555555555dddd"}}
	_, body := get(t, c, "/-/repos/"+hostileKey)
	if strings.Contains(body, old[:10]) || !strings.Contains(body, "(rewritten)") {
		t.Errorf("the page shows the old tip of a force-push, or not its move:\n%s", body)
	}
	if !strings.Contains(body, "1111111111") {
		t.Errorf("the page lost a fast-forward's old ID:\n%s", body)
	}
}

func TestHeadersForbidInlineScriptAndSniffing(t *testing.T) {
	c, _ := newTestConsole()
	for _, path := range []string{"/", "/-/repos", "/-/static/console.js", "/-/nowhere"} {
		resp, _ := get(t, c, path)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", path)
		}
	}
}

func TestAssetsAreServedFromTheBinary(t *testing.T) {
	c, _ := newTestConsole()
	for path, want := range map[string]string{"/-/static/console.js": "javascript", "/-/static/console.css": "text/css"} {
		resp, body := get(t, c, path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), want) || len(body) < 100 {
			t.Errorf("GET %s: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	if _, body := get(t, c, "/-/static/console.js"); strings.Contains(body, "?token") || strings.Contains(body, "innerHTML") {
		t.Error("the script puts the token in a URL or writes HTML")
	}
}

func TestTheRepositoryListingPassesItsFiltersAndPages(t *testing.T) {
	c, src := newTestConsole()
	_, body := get(t, c, "/-/repos?q=+Project-1+&state=failing&owner=7&network=linux&stale=7d&offset=50&limit=25")
	want := Query{Search: "Project-1", State: new(repostate.Failing), Owner: 7, Network: "linux", StaleOver: 7 * 24 * time.Hour, Offset: 50, Limit: 25}
	if !reflect.DeepEqual(src.last, want) {
		t.Errorf("query %+v, want %+v", src.last, want)
	}
	if !strings.Contains(body, "Matches 51 to 52, and more") {
		t.Errorf("the page does not say which matches it shows:\n%s", body)
	}
	for _, link := range []string{`rel="next"`, `offset=75`, `rel="prev"`, `offset=25`, `network=linux`, `value="linux"`} {
		if !strings.Contains(body, link) {
			t.Errorf("no %s link:\n%s", link, body)
		}
	}
	get(t, c, "/-/repos?stale=never")
	if !src.last.Never || src.last.Limit != pageSize {
		t.Errorf("stale=never: query %+v", src.last)
	}
}

// The state filter offers every state there is (package repostate), gone
// and the limits' included, keeps the one asked for selected, and refuses
// a name that is none, saying which there are.
func TestTheStateFilterOffersEveryState(t *testing.T) {
	c, src := newTestConsole()
	_, body := get(t, c, "/-/repos?state=too-many-refs")
	for _, s := range repostate.All() {
		option := "<option>" + s.String() + "</option>"
		if s == repostate.TooManyRefs {
			option = "<option selected>too-many-refs</option>"
		}
		if !strings.Contains(body, option) {
			t.Errorf("the filter lacks %s", option)
		}
	}
	if src.last.State == nil || *src.last.State != repostate.TooManyRefs {
		t.Errorf("query %+v, want state too-many-refs", src.last)
	}
	resp, body := get(t, c, "/-/repos?state=bogus")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "too-large") || !strings.Contains(body, "unplaceable") {
		t.Errorf("state=bogus: %d\n%s", resp.StatusCode, body)
	}
}

func TestBadRequestsAreRefusedWithAPage(t *testing.T) {
	c, _ := newTestConsole()
	for _, path := range []string{"/-/repos?owner=x", "/-/repos?stale=soon", "/-/repos?stale=-1h", "/-/repos?limit=100000", "/-/repos?offset=-1",
		"/-/repos?q=" + strings.Repeat("a", 300), "/-/repos?network=root:abc", "/-/repos?network=a/b"} {
		if resp, body := get(t, c, path); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "<html") {
			t.Errorf("GET %s: %d\n%s", path, resp.StatusCode, body)
		}
	}
	if resp, _ := get(t, c, "/-/repos/example.org/never/heard"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown repository: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, "/-/nowhere"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown page: %d", resp.StatusCode)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/-/repos", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /-/repos: %d", w.Code)
	}
}

func TestTheRepositoryPageOffersTheOperatorsActions(t *testing.T) {
	c, _ := newTestConsole()
	_, body := get(t, c, "/-/repos/github.com/a/b")
	for _, want := range []string{`data-url="/api/v1/repos/github.com/a/b/fetch"`, `data-method="DELETE"`, `id="cancel-task"`, "mirror.example/&lt;x&gt;.git", "refs/heads/&lt;evil&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("the repository page lacks %s:\n%s", want, body)
		}
	}
	// A key's markup stays out of the API path the script calls, too.
	_, body = get(t, c, "/-/repos/"+hostileKey)
	if !strings.Contains(body, `data-url="/api/v1/repos/example.org/a/%3Cscript%3Ealert%281%29%3C/script%3E%22%27/fetch"`) {
		t.Errorf("the hostile key's API path is not escaped as a path:\n%s", body)
	}
}

func TestTheOverviewNamesAHeldCatalogChange(t *testing.T) {
	c, src := newTestConsole()
	if _, body := get(t, c, "/"); strings.Contains(body, "Held back") {
		t.Errorf("nothing held, yet:\n%s", body)
	}
	src.catalog.Pending = &api.PendingPurge{Commit: "c0ffee", Removed: 7, Total: 100, Keys: []string{"github.com/a/<b>", "github.com/a/c"}}
	want := "the removal of 7 of 100 repositories is held (catalog commit c0ffee): github.com/a/&lt;b&gt;, github.com/a/c and 5 more"
	for _, path := range []string{"/", "/-/catalog"} {
		if _, body := get(t, c, path); !strings.Contains(body, want) {
			t.Errorf("GET %s does not name what is held (%q):\n%s", path, want, body)
		}
	}
	_, body := get(t, c, "/-/catalog")
	if !strings.Contains(body, `data-url="/api/v1/catalog/confirm-purge"`) {
		t.Errorf("no confirm button:\n%s", body)
	}
	if !strings.Contains(body, "lists/a.list:3: &lt;b&gt;not a URL&lt;/b&gt;") || !strings.Contains(body, "The first 1 of 2") {
		t.Errorf("the catalog's problems are not listed with file and line:\n%s", body)
	}
}

func TestTheNodesPageSaysWhenTheCoordinatorIsAway(t *testing.T) {
	c, src := newTestConsole()
	_, body := get(t, c, "/-/nodes")
	if !strings.Contains(body, `data-url="/api/v1/nodes/2/revoke"`) || strings.Contains(body, `/api/v1/nodes/1/revoke`) {
		t.Errorf("revoke: a partial node should have the button and the full node not:\n%s", body)
	}
	if !strings.Contains(body, "open") {
		t.Errorf("node 2's tunnel is not shown open:\n%s", body)
	}
	src.nodes, src.nodesErr = nil, errors.New("unavailable")
	if resp, body := get(t, c, "/-/nodes"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "out of reach") {
		t.Errorf("coordinator away: %d\n%s", resp.StatusCode, body)
	}
}

// The freshness chart draws the share current from the series, up to the
// share now; the lowest and the share now are named.
func TestTheFreshnessChartDrawsTheSeriesUpToNow(t *testing.T) {
	s := series.New()
	t0 := time.Unix(1e9, 0)
	for i := 1; i <= 4; i++ { // samples 10 minutes apart: 1, 2, 3 and 4 of 10
		s.Sample(t0.Add(time.Duration(i)*10*time.Minute), series.Gauges{Current: uint64(i), Total: 10})
	}
	now := t0.Add(45 * time.Minute)
	tr := trendsOf(series.Day, s.Window(series.Day, now, ChartPoints), 5, 10)
	if tr.FreshLowest != "10.0%" || tr.FreshNow != "50.0%" {
		t.Errorf("lowest %q, now %q; want 10.0%%, 50.0%%", tr.FreshLowest, tr.FreshNow)
	}
	// Five steps (four samples and now), each as wide as a point, the
	// last at half the height and reaching the right edge.
	c := tr.Fresh
	if got := strings.Count(c.Path, "H"); got != 5 || !strings.HasSuffix(c.Path, "V30H288") || strings.Count(c.Path, "M") != 4 {
		t.Errorf("the freshness path %q: want 5 steps in 4 runs (the samples are 10 minutes apart, a point is 5), the last at y=30 to x=288", c.Path)
	}
	// With nothing known but now, one step at the right edge.
	tr = trendsOf(series.Day, series.New().Window(series.Day, now, ChartPoints), 3, 4)
	if !strings.HasSuffix(tr.Fresh.Path, "H288") || strings.Count(tr.Fresh.Path, "M") != 1 || tr.FreshLowest != "75.0%" {
		t.Errorf("only now known: path %q, lowest %q", tr.Fresh.Path, tr.FreshLowest)
	}
}

// The charts of what is counted are areas whose top is the largest point,
// with the total over the range; a week's has a point an hour.
func TestTheTrendChartsCountOverTheRange(t *testing.T) {
	s := series.New()
	now := time.Unix(1e9, 0)
	s.Count(now.Add(-10*time.Minute), series.Counts{Checks: 1000, Fetches: 2, Failures: 1, ServedBytes: 3 << 20})
	s.Count(now.Add(-2*time.Minute), series.Counts{Checks: 500})
	s.Count(now.Add(-30*time.Hour), series.Counts{Checks: 7}) // in the week only
	s.Sample(now, series.Gauges{DiskUsed: 2 << 30, Current: 1, Total: 1})
	day := trendsOf(series.Day, s.Window(series.Day, now, ChartPoints), 1, 1)
	byID := map[string]chart{}
	for _, c := range day.Charts {
		byID[c.ID] = c
	}
	for id, want := range map[string]string{"trend-checks": "1,500 checks", "trend-fetches": "2 fetches", "trend-failures": "1 failure",
		"trend-served": "3.0 MiB", "trend-disk": "2.0 GiB at the last sample"} {
		if got := byID[id].Summary; got != want {
			t.Errorf("%s over the day: %q, want %q", id, got, want)
		}
	}
	if c := byID["trend-checks"]; c.Top != "1,000" || c.Line || !strings.HasPrefix(c.Path, "M0 48") || !strings.HasSuffix(c.Path, "V48Z") {
		t.Errorf("the checks' chart: top %q, path %q", c.Top, c.Path)
	}
	if !day.To.After(now) {
		t.Errorf("the day's chart ends at %s, before now (%s)", day.To, now)
	}
	week := trendsOf(series.Week, s.Window(series.Week, now, ChartPoints), 1, 1)
	if got := week.Charts[0].Summary; got != "1,507 checks" {
		t.Errorf("checks over the week: %q", got)
	}
	if week.Range != "week" || week.OtherURL != "/" || week.Point != "an hour" {
		t.Errorf("the week's labels: %+v", week)
	}
}

func TestCountsAreSeparatedAndNounsFitTheirCount(t *testing.T) {
	c, src := newTestConsole()
	one := 1
	src.total = &one
	if _, body := get(t, c, "/-/repos?state=ok"); !strings.Contains(body, "1 repository matches; 1 to 1 shown.") {
		t.Errorf("one match:\n%s", body)
	}
	many := 100000
	src.total = &many
	if _, body := get(t, c, "/-/repos?state=ok"); !strings.Contains(body, "100,000 repositories match; 1 to 2 shown.") {
		t.Errorf("100,000 matches:\n%s", body)
	}
	_, body := get(t, c, "/-/repos/github.com/a/b")
	if !strings.Contains(body, "1 check, 1 fetch") {
		t.Errorf("the repository page's checks:\n%s", body)
	}
	if _, body := get(t, c, "/"); !strings.Contains(body, "1 tunnel open") || !strings.Contains(body, "1 pull from owners") {
		t.Errorf("the overview's plurals:\n%s", body)
	}
}

func TestARepositoryWithoutAnOwnerSaysNoneYet(t *testing.T) {
	c, src := newTestConsole()
	src.repos[1].Owner = 0
	for _, path := range []string{"/-/repos", "/-/repos/github.com/a/b"} {
		if _, body := get(t, c, path); !strings.Contains(body, "none yet") || strings.Contains(body, "owner=0") {
			t.Errorf("GET %s: no \"none yet\" for the repository without an owner:\n%s", path, body)
		}
	}
	if _, body := get(t, c, "/-/repos/github.com/a/b"); !strings.Contains(body, "once a node owns it") {
		t.Errorf("the next check of a repository without an owner:\n%s", body)
	}
}

// A repository in a fork network names it on its page, with a link to
// the network's members (and the nodes it is split over); a standalone one
// names none.
func TestARepositoryPageLinksToItsForkNetwork(t *testing.T) {
	c, src := newTestConsole()
	src.repos[1].Network, src.repos[1].NetworkParts = "root:0123456789abcdef0123456789abcdef01234567", 3
	_, body := get(t, c, "/-/repos/github.com/a/b")
	for _, want := range []string{`<a href="/-/repos?network=root%3a0123456789abcdef0123456789abcdef01234567">root:0123456789abcdef0123456789abcdef01234567</a>`,
		"(split over 3 nodes)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page of a network's member lacks %s:\n%s", want, body)
		}
	}
	src.repos[1].Network = ""
	if _, body := get(t, c, "/-/repos/github.com/a/b"); strings.Contains(body, `id="network"`) {
		t.Errorf("a standalone repository's page names a network:\n%s", body)
	}
}

// A repository's page: times in UTC with their zone, the refs with the
// dates of their tips, what each entry of the log changed, the last
// success apart from the last attempt, the size on disk, the next check,
// and the log in pages.
func TestTheRepositoryPageShowsItsHistoryInPages(t *testing.T) {
	c, src := newTestConsole()
	at := time.Unix(1e9-1800, 0).UTC()
	src.repos[1].LastCheck, src.repos[1].VerifiedAt, src.repos[1].StalenessSeconds = &at, &at, 1800
	_, body := get(t, c, "/-/repos/github.com/a/b")
	for _, want := range []string{
		`<time datetime="2001-09-09T01:16:40Z">2001-09-09T01:16:40Z</time>`, // verified_at and the last attempt
		"behind by at most <b id=\"staleness-value\">30m</b>",
		`<td id="last-success"><time datetime="2001-09-09T00:46:40Z">`,
		"2001-09-08T01:46:40Z",                              // the ref's tip's date
		"<code>1111111111</code> → <code>2222222222</code>", // what a pull moved
		"5.0 MiB",
		"on node 2's schedule",
		`id="log-older"`, "before=e24",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the repository page lacks %s:\n%s", want, body)
		}
	}
	if n := strings.Count(body, "<tr data-id="); n != logPage {
		t.Errorf("the first page of the log has %d entries, want %d", n, logPage)
	}
	if strings.Contains(body, "log-newest") {
		t.Error("the newest page links to the newest")
	}
	_, body = get(t, c, "/-/repos/github.com/a/b?before=e24")
	if src.lastBefore != "e24" || !strings.Contains(body, `data-id="e25"`) || strings.Contains(body, `data-id="e24"`) ||
		!strings.Contains(body, `id="log-newest"`) || !strings.Contains(body, "before=e49") {
		t.Errorf("the second page of the log (before %q):\n%s", src.lastBefore, body)
	}
	// The second page is not live: it would not move.
	if strings.Contains(body, `id="log-live" data-live`) {
		t.Error("an older page of the log is swapped live")
	}
	_, body = get(t, c, "/-/repos/github.com/a/b?before=e49")
	if strings.Contains(body, "log-older") || strings.Count(body, "<tr data-id=") != 10 {
		t.Errorf("the last page of the log:\n%s", body)
	}
	if resp, _ := get(t, c, "/-/repos/github.com/a/b?before=a/b"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a cursor that is not one: %d", resp.StatusCode)
	}
	// The operator's script reads the same page of the log from the API.
	if _, body := get(t, c, "/-/repos/github.com/a/b?before=e24"); !strings.Contains(body, `data-api="/api/v1/repos/github.com/a/b/log?before=e24&amp;limit=25"`) {
		t.Errorf("the log's API page:\n%s", body)
	}
}

func TestTheCatalogPageSaysWhereFromAndWhen(t *testing.T) {
	c, src := newTestConsole()
	last, since := testNow.Add(-2*time.Minute).UTC(), testNow.Add(-time.Hour).UTC()
	src.catalog.URL = "https://REDACTED@git.example.org/<catalog>.git"
	src.catalog.LastFetch, src.catalog.NextFetch = last, testNow.Add(3*time.Minute)
	_, body := get(t, c, "/-/catalog")
	for _, want := range []string{"https://REDACTED@git.example.org/&lt;catalog&gt;.git", `<time datetime="2001-09-09T02:44:40Z">`,
		"2m ago: it succeeded", "in 3m"} {
		if !strings.Contains(body, want) {
			t.Errorf("the catalog page lacks %s:\n%s", want, body)
		}
	}
	src.catalog.Error, src.catalog.ErrorClass, src.catalog.ErrorAt = hostileError, repostate.ClassUnreachable, &since
	_, body = get(t, c, "/-/catalog")
	if !strings.Contains(body, "The catalog cannot be read") || !strings.Contains(body, unreachable) ||
		!strings.Contains(body, "it failed") || strings.Contains(body, "10.0.0.5") {
		t.Errorf("the catalog's error, as its class:\n%s", body)
	}
	if n := strings.Count(body, `id="catalog-error"`); n != 1 {
		t.Errorf("the catalog's error is said %d times, want once (the banner):\n%s", n, body)
	}
	// A path on the coordinator's machine is the operator's, as in the
	// error's text.
	src.catalog.URL = "/srv/gitfleet/catalog"
	if _, body = get(t, c, "/-/catalog"); strings.Contains(body, "/srv/gitfleet") || !strings.Contains(body, "a path on the coordinator's machine") {
		t.Errorf("a local catalog's path on the public page:\n%s", body)
	}
}

func TestNodeHistoryStartsWithJoining(t *testing.T) {
	c, _ := newTestConsole()
	_, body := get(t, c, "/-/nodes")
	if strings.Contains(body, "unknown") || !strings.Contains(body, "joined") || !strings.Contains(body, "suspect → alive") {
		t.Errorf("the nodes' history:\n%s", body)
	}
	if got := transition(api.Transition{From: "unknown", To: "suspect"}); got != "joined, suspect" {
		t.Errorf("joined as suspect: %q", got)
	}
}

func TestTheOverviewDrawsTheDayOrTheWeek(t *testing.T) {
	c, src := newTestConsole()
	_, body := get(t, c, "/")
	for _, want := range []string{"Freshness, last day", `id="fresh-chart"`, `id="trend-checks"`, "180 checks", `id="trend-served"`, "60.0 MiB",
		`id="trend-disk"`, "1.0 GiB at the last sample", `href="/?range=week"`, `id="overview-live" data-live`} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %s:\n%s", want, body)
		}
	}
	if src.lastRange != series.Day {
		t.Errorf("the overview asked for range %d", src.lastRange)
	}
	_, body = get(t, c, "/?range=week")
	if src.lastRange != series.Week || !strings.Contains(body, "Freshness, last week") || !strings.Contains(body, "180 checks") {
		t.Errorf("the week (range %d):\n%s", src.lastRange, body)
	}
	if resp, _ := get(t, c, "/?range=year"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("range=year: %d", resp.StatusCode)
	}
}

// The public status of a repository and its badge: a word and a color for
// where it stands, cached for a minute; a key not mirrored is 404 (a grey
// badge that says so), and a hostile key never comes back unescaped.
func TestThePublicStatusAndBadge(t *testing.T) {
	c, src := newTestConsole()
	for _, tt := range []struct {
		repo       api.Repo
		word, fill string
	}{
		{api.Repo{State: repostate.OK, Served: true, Current: true}, "current", "#2e7d32"},
		{api.Repo{State: repostate.OK, Served: true}, "behind", "#b26a00"},
		{api.Repo{State: repostate.Failing, Served: true, Current: true, LastError: hostileError}, "failing", "#c62828"},
		{api.Repo{State: repostate.Corrupt}, "failing", "#c62828"},
		{api.Repo{State: repostate.Repairing}, "behind", "#b26a00"},
		{api.Repo{State: repostate.Pending}, "not mirrored", "#6b7280"},
	} {
		tt.repo.Key = "github.com/a/b"
		src.repos[1] = tt.repo
		resp, body := get(t, c, "/-/badge/github.com/a/b.svg")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" ||
			resp.Header.Get("Cache-Control") != "public, max-age=60" || !strings.Contains(body, ">"+tt.word+"</text>") ||
			!strings.Contains(body, `fill="`+tt.fill+`"`) || !strings.HasPrefix(body, "<svg ") {
			t.Errorf("%+v: badge %d %q %q\n%s", tt.repo, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), body)
		}
		resp, body = get(t, c, "/-/status/github.com/a/b")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, max-age=60" ||
			!strings.Contains(body, `id="status-word">`+tt.word+"<") || strings.Contains(body, "10.0.0.5") {
			t.Errorf("%+v: status page %d\n%s", tt.repo, resp.StatusCode, body)
		}
	}
	if _, body := get(t, c, "/-/status/github.com/a/b"); !strings.Contains(body, "[![mirror: not mirrored](http://example.com/-/badge/github.com/a/b.svg)](http://example.com/-/status/github.com/a/b)") {
		t.Errorf("the badge's Markdown:\n%s", body)
	}
	// The hostile key is mirrored: its page escapes it, its badge does not
	// hold it at all.
	resp, body := get(t, c, "/-/status/"+hostileKey)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "<script>alert") || strings.Contains(body, "10.0.0.5") {
		t.Errorf("the hostile key's status: %d\n%s", resp.StatusCode, body)
	}
	for _, path := range []string{"/-/badge/" + hostileKey + ".svg", "/-/badge/example.org/%3Csvg%20onload=alert(1)%3E.svg", "/-/badge/github.com/a/b"} {
		resp, body := get(t, c, path)
		want := http.StatusNotFound
		if path == "/-/badge/"+hostileKey+".svg" {
			want = http.StatusOK
		}
		if resp.StatusCode != want || strings.Contains(body, "script") || strings.Contains(body, "onload") || strings.Contains(body, "example.org") {
			t.Errorf("GET %s: %d (want %d)\n%s", path, resp.StatusCode, want, body)
		}
	}
	resp, body = get(t, c, "/-/status/example.org/<b>never</b>")
	if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "<b>never") || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("a key not mirrored: %d %q\n%s", resp.StatusCode, resp.Header.Get("Cache-Control"), body)
	}
	if resp, body := get(t, c, "/-/badge/example.org/never.svg"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, ">not mirrored</text>") {
		t.Errorf("the badge of a key not mirrored: %d\n%s", resp.StatusCode, body)
	}
}

// Every page says, above its title, that the catalog cannot be read: its
// error's class and since when, not its text (the operator's catalog URL).
func TestEveryPageShowsABannerWhileTheCatalogCannotBeRead(t *testing.T) {
	c, src := newTestConsole()
	pages := []string{"/", "/-/repos", "/-/repos/github.com/a/b", "/-/nodes", "/-/tasks", "/-/catalog", "/-/no-such-page"}
	for _, path := range pages {
		if _, body := get(t, c, path); strings.Contains(body, `id="catalog-error"`) {
			t.Errorf("GET %s: a banner while the catalog is read:\n%s", path, body)
		}
	}
	since := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	src.catalog = api.CatalogStatus{Error: "catalog: fetch https://user:pw@git.example.org/catalog.git: unable to access",
		ErrorClass: repostate.ClassUnreachable, ErrorAt: &since}
	for _, path := range pages {
		_, body := get(t, c, path)
		if !strings.Contains(body, `<p class="warn" id="catalog-error" role="alert">The catalog cannot be read (upstream unreachable) since 2026-11-27 10:00 UTC: no repository is mirrored until it can be.`) {
			t.Errorf("GET %s: no banner, or not the one expected:\n%s", path, body)
		}
		if strings.Contains(body, "git.example.org") || strings.Contains(body, "pw@") {
			t.Errorf("GET %s: the banner shows the error's text:\n%s", path, body)
		}
	}
	// The public status page of a repository is for a project's visitors:
	// the operator's catalog is none of their business.
	if _, body := get(t, c, "/-/status/github.com/a/b"); strings.Contains(body, `id="catalog-error"`) || !strings.Contains(body, "github.com/a/b") {
		t.Errorf("the public status page shows the catalog's banner, or not the repository:\n%s", body)
	}
}

// The overview shows each forge feed: its state, the repositories fed,
// unfed and unaskable, its requests in the last hour and each token's
// budget left.
func TestTheOverviewShowsTheFeedsCoverageAndBudget(t *testing.T) {
	c, src := newTestConsole()
	if _, body := get(t, c, "/"); strings.Contains(body, "Forge feeds") {
		t.Errorf("no feed, yet a feeds section:\n%s", body)
	}
	src.feeds = []api.FeedStatus{{Host: "github.com", State: "feed-limited", Repos: 12, Fed: 2, Unaskable: 3, RequestsLastHour: 60,
		RequestsPerHourMax: 4000, Tokens: []api.TokenBudget{{Name: "token 1 of 2", Remaining: 4940}, {Name: "token 2 of 2", Remaining: -1}}}}
	_, body := get(t, c, "/")
	for _, want := range []string{`<tr class="feed feed-limited"><th>github.com</th><td>feed-limited</td><td class="num">2</td><td class="num">10</td><td class="num">3</td>`,
		"60 of 4,000", "token 1 of 2: 4,940, token 2 of 2: not said"} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview does not show %q:\n%s", want, body)
		}
	}
}

// A renamed repository names its new key, escaped, on its page and its
// public status, with the time the rename was first seen.
func TestARenamedRepositoryShowsItsNewName(t *testing.T) {
	c, src := newTestConsole()
	since := time.Unix(1e9, 0).UTC()
	src.repos[1].State, src.repos[1].StateSince = repostate.Renamed, &since
	src.repos[1].RenamedTo = "github.com/new-owner/<b>b</b>"
	for _, path := range []string{"/-/repos/github.com/a/b", "/-/status/github.com/a/b"} {
		_, body := get(t, c, path)
		if !strings.Contains(body, "renamed to") || !strings.Contains(body, "github.com/new-owner/&lt;b&gt;b&lt;/b&gt;") ||
			!strings.Contains(body, since.Format(time.RFC3339)) {
			t.Errorf("GET %s does not show the new name, escaped, and since when:\n%s", path, body)
		}
	}
}

// On the full tier, the listing names each repository's replicas, and its
// page each replica's state; with every full node holding everything, both
// say so.
func TestTheRepositoryListingAndPageShowTheReplicas(t *testing.T) {
	c, src := newTestConsole()
	src.repos[1].Replicas = []uint32{3, 5}
	src.repos[1].ReplicaStates = []api.ReplicaState{{Node: 3, Confirmed: true, Current: true}, {Node: 5, Confirmed: true, Behind: true}}
	if _, body := get(t, c, "/-/repos"); !strings.Contains(body, `<td class="replicas">3, 5</td>`) {
		t.Errorf("the listing does not name the replicas 3 and 5:\n%s", body)
	}
	_, body := get(t, c, "/-/repos/github.com/a/b")
	for _, want := range []string{`data-node="3">node 3: current</span>`, `data-node="5">node 5: behind</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the repository's page lacks %s:\n%s", want, body)
		}
	}
	src.repos[1].Replicas, src.repos[1].ReplicaStates = nil, nil
	if _, body := get(t, c, "/-/repos/github.com/a/b"); !strings.Contains(body, `<td id="replicas">every full node</td>`) {
		t.Errorf("the page of a repository every full node holds:\n%s", body)
	}
}
