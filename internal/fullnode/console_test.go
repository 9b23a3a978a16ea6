package fullnode

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/console"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

func keysOf(p console.Page) []string {
	var out []string
	for _, r := range p.Repos {
		out = append(out, r.Key)
	}
	return out
}

func TestConsoleSearchFindsSubstringsInOrderAndStopsAtThePage(t *testing.T) {
	f := benchFullNode(t, 1000)
	src := f.consoleSrc
	// repo99 and repo990 to repo999, whatever the case of the search.
	p := src.Repos(console.Query{Search: "REPO99", Limit: 5})
	want := []string{"host0.example/group94/repo994", "host1.example/group95/repo995", "host1.example/group99/repo99",
		"host2.example/group96/repo996", "host3.example/group90/repo990"}
	if got := keysOf(p); !slices.Equal(got, want) || !p.More || p.Total != -1 {
		t.Errorf("page %v (more %v, total %d), want %v and more", got, p.More, p.Total, want)
	}
	p = src.Repos(console.Query{Search: "repo99", Offset: 10, Limit: 5})
	if got := keysOf(p); len(got) != 1 || p.More {
		t.Errorf("the last page: %v (more %v), want one key", got, p.More)
	}
	// The other filters apply on the way: repo993 is the only failing one.
	p = src.Repos(console.Query{Search: "repo99", State: "failing", Limit: 5})
	if got := keysOf(p); !slices.Equal(got, []string{"host6.example/group93/repo993"}) || p.More {
		t.Errorf("failing: %v", got)
	}
	if p := src.Repos(console.Query{Search: "nowhere", Limit: 5}); len(p.Repos) != 0 || p.More {
		t.Errorf("a search that matches nothing: %v", keysOf(p))
	}
	// A key added, and one removed, are seen by the next search.
	f.states([]*fleetv1.RepoState{{Key: "gitee.com/new/repo99x", Url: "https://gitee.com/new/repo99x", State: "pending"}})
	f.removed([]string{"host1.example/group99/repo99"})
	p = src.Repos(console.Query{Search: "repo99", Limit: 50})
	if got := keysOf(p); !slices.Contains(got, "gitee.com/new/repo99x") || slices.Contains(got, "host1.example/group99/repo99") || len(got) != 11 {
		t.Errorf("after an addition and a removal: %v", got)
	}
	// A search of one byte, which no pair narrows.
	if got := keysOf(src.Repos(console.Query{Search: "W", Limit: 5})); !slices.Equal(got, []string{"gitee.com/new/repo99x"}) {
		t.Errorf("a search for w: %v", got)
	}
}

func TestConsoleCountsStalenessAndErrorClassesAsStatesChange(t *testing.T) {
	f := benchFullNode(t, 100) // every one checked at the fake clock's now
	src := f.consoleSrc
	now := f.clk.Now().UnixMilli()
	key := func(i int) string { return fmt.Sprintf("host%d.example/group%d/repo%d", i%7, i%100, i) }
	st := func(i int, lastCheck int64, errText string) *fleetv1.RepoState {
		state := "ok"
		if errText != "" {
			state = "failing"
		}
		return &fleetv1.RepoState{Key: key(i), Url: "https://" + key(i), State: state, LastCheckMs: lastCheck, LastError: errText, Digest: fmt.Sprintf("d%d", i)}
	}
	states := func(rs ...*fleetv1.RepoState) { // checked, and verified by the full node, then
		f.states(rs)
		for _, r := range rs {
			forceVerified(f, r.GetKey(), r.GetLastCheckMs())
		}
		f.reclass(stateKeys(rs)...)
	}
	states(
		st(5, now-2*time.Hour.Milliseconds(), "git ls-remote: timeout: no answer"),
		st(6, now-3*time.Hour.Milliseconds(), "git fetch: network: connection refused"),
		st(7, now-8*24*time.Hour.Milliseconds(), "git fetch: network: could not resolve host"),
		st(8, 0, ""),
	)
	ov := src.Overview()
	// under 10m, 10m-1h, 1h-6h, 6h-1d, 1d-7d, over 7d, never
	if want := []int{96, 0, 2, 0, 0, 1, 1}; !slices.Equal(ov.Staleness, want) {
		t.Errorf("staleness %v, want %v", ov.Staleness, want)
	}
	// The bench node's failing repositories (1 in 10) have no error text.
	if want := map[string]int{api.ErrClassTimeout: 1, api.ErrClassUnreachable: 2}; fmt.Sprint(ov.Errors) != fmt.Sprint(want) {
		t.Errorf("errors %v, want %v", ov.Errors, want)
	}
	// The stalest first, never checked before all.
	p := src.Repos(console.Query{StaleOver: time.Hour, Limit: 10})
	if got, want := keysOf(p), []string{key(8), key(7), key(6), key(5)}; !slices.Equal(got, want) {
		t.Errorf("stale over 1h: %v, want %v", got, want)
	}
	if got := keysOf(src.Repos(console.Query{Never: true, Limit: 10})); !slices.Equal(got, []string{key(8)}) {
		t.Errorf("never checked: %v", got)
	}
	if got := keysOf(src.Repos(console.Query{StaleOver: time.Hour, Search: "REPO6", State: "failing", Limit: 10})); !slices.Equal(got, []string{key(6)}) {
		t.Errorf("stale, failing, searched: %v", got)
	}
	// Checked again: back in the first bucket, its error gone.
	states(st(5, now, ""), st(7, now, ""))
	f.removed([]string{key(6)})
	ov = src.Overview()
	if want := []int{98, 0, 0, 0, 0, 0, 1}; !slices.Equal(ov.Staleness, want) {
		t.Errorf("staleness after new checks %v, want %v", ov.Staleness, want)
	}
	if len(ov.Errors) != 0 {
		t.Errorf("errors after new checks: %v", ov.Errors)
	}
	if got := keysOf(src.Repos(console.Query{StaleOver: time.Hour, Limit: 10})); !slices.Equal(got, []string{key(8)}) {
		t.Errorf("stale over 1h after new checks: %v", got)
	}
}

func TestConsoleIsMountedAtTheRootAndUnderDash(t *testing.T) {
	f := benchFullNode(t, 10)
	h := f.publicHandler()
	for path, want := range map[string]string{"/": "Overview", "/-/repos?q=repo1": "host1.example/group1/repo1", "/-/repos/host1.example/group1/repo1": "Fetch now"} {
		w := httpGet(h, path)
		if w.Code != 200 || !strings.Contains(w.Body.String(), want) || w.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d, want %q in\n%s", path, w.Code, want, w.Body)
		}
	}
	// git and the API keep their paths.
	if w := httpGet(h, "/api/v1/repos?limit=1"); w.Code != 200 || !strings.Contains(w.Header().Get("Content-Type"), "json") {
		t.Errorf("the API: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
}

func httpGet(h http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

func TestConsoleSamplesFreshnessEveryTenMinutes(t *testing.T) {
	f := benchFullNode(t, 10)
	clk := f.clk.(*clock.Fake)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.consoleSrc.sampleLoop(ctx) }()
	defer func() { cancel(); <-done }()
	// Advance until three samples were taken: the loop may not be waiting
	// yet when the clock first moves.
	deadline := time.Now().Add(30 * time.Second)
	for len(f.consoleSrc.fresh.Samples()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("samples after 30 s: %+v", f.consoleSrc.fresh.Samples())
		}
		clk.Advance(console.FreshnessEvery)
		time.Sleep(5 * time.Millisecond)
	}
	s := f.consoleSrc.fresh.Samples()
	if s[0].Total != 10 || s[0].Current != f.totals().current || !s[1].At.After(s[0].At) {
		t.Errorf("samples %+v, want 10 repositories, %d current, in order", s, f.totals().current)
	}
	if ov := f.consoleSrc.Overview(); len(ov.Freshness) != len(f.consoleSrc.fresh.Samples()) {
		t.Errorf("the overview has %d samples", len(ov.Freshness))
	}
}

// Found in review: a page of the public whose filters match nothing (a
// state no repository has, with a staleness filter) made the node look at
// every key with its lock held. It stops after maxConsoleExamined keys and
// says there may be more.
func TestAConsolePageThatMatchesNothingStopsEarly(t *testing.T) {
	f := benchFullNode(t, maxConsoleExamined+5000)
	src := f.consoleSrc
	if fc, ok := f.clk.(*clock.Fake); ok {
		fc.Advance(time.Hour) // every repository stale by an hour
	} else {
		t.Fatal("the node's clock is not a fake one")
	}
	for _, q := range []console.Query{
		{StaleOver: time.Nanosecond, State: "no-such-state", Limit: 50},
		{Search: "repo", State: "no-such-state", Limit: 50},
	} {
		p := src.Repos(q)
		if len(p.Repos) != 0 || !p.More {
			t.Errorf("%+v: %d repositories, more %v; want none, and more", q, len(p.Repos), p.More)
		}
	}
}
