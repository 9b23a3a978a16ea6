package console

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
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
}

func (s *fakeSource) Repos(q Query) Page {
	s.last = q
	return Page{Repos: s.repos, Total: -1, More: true}
}

func (s *fakeSource) GetRepo(key string) (Detail, bool) {
	for _, r := range s.repos {
		if r.Key == key {
			at := time.Unix(1e9, 0).UTC()
			return Detail{RepoDetail: api.RepoDetail{Repo: r, Attrs: map[string]string{"note": "<b>bold</b>"},
				Refs:    map[string]string{"refs/heads/<evil>": "0123456789abcdef0123456789abcdef01234567"},
				History: []api.HistoryEntry{{At: at, Kind: "check", Node: 2, Error: hostileError}}},
				Fallbacks: []string{"https://mirror.example/<x>.git"}}, true
		}
	}
	return Detail{}, false
}

func (s *fakeSource) Nodes(context.Context) ([]api.Node, error) { return s.nodes, s.nodesErr }

func (s *fakeSource) Catalog(context.Context) (api.CatalogStatus, error) { return s.catalog, nil }

func (s *fakeSource) Overview() Overview {
	return Overview{Total: 3, Current: 2, ByState: map[string]int{"ok": 2, "failing": 1},
		Staleness: []int{1, 1, 0, 0, 0, 0, 1}, Errors: map[string]int{api.ErrClassUnreachable: 1},
		Fetching: []string{hostileKey}, FetchingTotal: 1,
		Freshness: []Sample{{At: time.Unix(1e9, 0), Current: 1, Total: 3}, {At: time.Unix(1e9+600, 0), Current: 2, Total: 3}}}
}

func (s *fakeSource) Tunnels() []uint32 { return []uint32{2} }

func newTestConsole() (*Console, *fakeSource) {
	src := &fakeSource{
		repos: []api.Repo{{Key: hostileKey, State: "failing", Owner: 2, LastError: hostileError, UpstreamURL: "https://" + hostileKey},
			{Key: "github.com/a/b", State: "ok", Owner: 2, Current: true}},
		nodes: []api.Node{{ID: 2, Name: `<i>node</i>`, Mode: "partial", State: "alive", Capacity: 1, EffectiveWeight: 1,
			History: []api.Transition{{From: "suspect", To: "alive", At: time.Unix(1e9, 0)}}},
			{ID: 1, Name: "full", Mode: "full", State: "alive"}},
		catalog: api.CatalogStatus{Commit: "c0ffee", Repos: 3, Problems: 2, ProblemLines: []string{"lists/a.list:3: <b>not a URL</b>"}},
	}
	return New(src, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.NewFake(time.Unix(1e9+3600, 0))), src
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
	for _, path := range []string{"/", "/-/", "/-/repos", "/-/repos?q=script", "/-/repos/" + hostileKey, "/-/nodes", "/-/tasks", "/-/catalog"} {
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
		if _, body := get(t, c, path); !strings.Contains(body, api.ErrClassUnreachable) {
			t.Errorf("GET %s does not show the class %q:\n%s", path, api.ErrClassUnreachable, body)
		}
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
	_, body := get(t, c, "/-/repos?q=+Project-1+&state=failing&owner=7&stale=7d&offset=50&limit=25")
	want := Query{Search: "Project-1", State: "failing", Owner: 7, StaleOver: 7 * 24 * time.Hour, Offset: 50, Limit: 25}
	if src.last != want {
		t.Errorf("query %+v, want %+v", src.last, want)
	}
	if !strings.Contains(body, "Matches 51 to 52, and more") {
		t.Errorf("the page does not say which matches it shows:\n%s", body)
	}
	for _, link := range []string{`rel="next"`, `offset=75`, `rel="prev"`, `offset=25`} {
		if !strings.Contains(body, link) {
			t.Errorf("no %s link:\n%s", link, body)
		}
	}
	get(t, c, "/-/repos?stale=never")
	if !src.last.Never || src.last.Limit != pageSize {
		t.Errorf("stale=never: query %+v", src.last)
	}
}

func TestBadRequestsAreRefusedWithAPage(t *testing.T) {
	c, _ := newTestConsole()
	for _, path := range []string{"/-/repos?owner=x", "/-/repos?stale=soon", "/-/repos?stale=-1h", "/-/repos?limit=100000", "/-/repos?offset=-1",
		"/-/repos?q=" + strings.Repeat("a", 300)} {
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

func TestFreshnessKeepsOneSampleAnIntervalInARing(t *testing.T) {
	f := NewFreshness(10*time.Minute, 3)
	t0 := time.Unix(1e9, 0)
	if !f.Record(t0, 1, 10) || f.Record(t0.Add(time.Minute), 2, 10) {
		t.Fatal("the first sample must be kept and one a minute later dropped")
	}
	for i := 1; i <= 4; i++ {
		if !f.Record(t0.Add(time.Duration(i)*10*time.Minute), i, 10) {
			t.Fatalf("sample %d dropped", i)
		}
	}
	got := f.Samples()
	if len(got) != 3 || got[0].Current != 2 || got[2].Current != 4 {
		t.Errorf("samples %+v, want the last three, oldest first", got)
	}
	c := chart(got, 5, 10)
	if n := len(c.Bars); n != 4 || c.Lowest != "20.0%" || c.Now != "50.0%" || c.Bars[3].H != 30 || c.Bars[3].X+2 != c.Width {
		t.Errorf("chart %+v", c)
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
	src.catalog = api.CatalogStatus{Error: "catalog: fetch https://user:pw@git.example.org/catalog.git: unable to access", ErrorAt: &since}
	for _, path := range pages {
		_, body := get(t, c, path)
		if !strings.Contains(body, `<p class="warn" id="catalog-error" role="alert">The catalog cannot be read (upstream unreachable) since 2026-11-27 10:00 UTC: no repository is mirrored until it can be.`) {
			t.Errorf("GET %s: no banner, or not the one expected:\n%s", path, body)
		}
		if strings.Contains(body, "git.example.org") || strings.Contains(body, "pw@") {
			t.Errorf("GET %s: the banner shows the error's text:\n%s", path, body)
		}
	}
}
