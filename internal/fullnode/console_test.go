package fullnode

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/console"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/series"
	"github.com/gitfleet/gitfleet/internal/tunnel"
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
	p := src.Repos(t.Context(), console.Query{Search: "REPO99", Limit: 5})
	want := []string{"host0.example/group94/repo994", "host1.example/group95/repo995", "host1.example/group99/repo99",
		"host2.example/group96/repo996", "host3.example/group90/repo990"}
	if got := keysOf(p); !slices.Equal(got, want) || !p.More || p.Total != -1 {
		t.Errorf("page %v (more %v, total %d), want %v and more", got, p.More, p.Total, want)
	}
	p = src.Repos(t.Context(), console.Query{Search: "repo99", Offset: 10, Limit: 5})
	if got := keysOf(p); len(got) != 1 || p.More {
		t.Errorf("the last page: %v (more %v), want one key", got, p.More)
	}
	// The other filters apply on the way: repo993 is the only failing one.
	p = src.Repos(t.Context(), console.Query{Search: "repo99", State: new(repostate.Failing), Limit: 5})
	if got := keysOf(p); !slices.Equal(got, []string{"host6.example/group93/repo993"}) || p.More {
		t.Errorf("failing: %v", got)
	}
	if p := src.Repos(t.Context(), console.Query{Search: "nowhere", Limit: 5}); len(p.Repos) != 0 || p.More {
		t.Errorf("a search that matches nothing: %v", keysOf(p))
	}
	// A key added, and one removed, are seen by the next search.
	f.states([]*fleetv1.RepoState{{Key: "gitee.com/new/repo99x", Url: "https://gitee.com/new/repo99x", State: "pending"}})
	f.removed(context.Background(), []string{"host1.example/group99/repo99"})
	p = src.Repos(t.Context(), console.Query{Search: "repo99", Limit: 50})
	if got := keysOf(p); !slices.Contains(got, "gitee.com/new/repo99x") || slices.Contains(got, "host1.example/group99/repo99") || len(got) != 11 {
		t.Errorf("after an addition and a removal: %v", got)
	}
	// A search of one byte, which no pair narrows.
	if got := keysOf(src.Repos(t.Context(), console.Query{Search: "W", Limit: 5})); !slices.Equal(got, []string{"gitee.com/new/repo99x"}) {
		t.Errorf("a search for w: %v", got)
	}
}

// The console's network filter lists a fork network's members, alone (the
// API's listing) and with a search (the search's walk).
func TestConsoleListsAForkNetworksMembers(t *testing.T) {
	f := benchFullNode(t, 1000)
	src := f.consoleSrc
	members := []string{"host1.example/group99/repo99", "host2.example/group96/repo996", "host5.example/group12/repo12"}
	var rs []*fleetv1.RepoState
	for _, k := range members {
		rs = append(rs, &fleetv1.RepoState{Key: k, Url: "https://" + k, State: "ok", Network: "linux"})
	}
	f.states(rs)
	p := src.Repos(t.Context(), console.Query{Network: "linux", Limit: 50})
	if got := keysOf(p); !slices.Equal(got, members) || p.Total != 3 {
		t.Errorf("the network's members: %v (total %d), want %v", got, p.Total, members)
	}
	p = src.Repos(t.Context(), console.Query{Search: "repo99", Network: "linux", Limit: 50})
	if got := keysOf(p); !slices.Equal(got, members[:2]) {
		t.Errorf("the network's members that match repo99: %v, want %v", got, members[:2])
	}
	if p := src.Repos(t.Context(), console.Query{Network: "no-members", Limit: 50}); len(p.Repos) != 0 || p.Total != 0 {
		t.Errorf("a network without members: %v (total %d)", keysOf(p), p.Total)
	}
}

func TestConsoleCountsStalenessAndErrorClassesAsStatesChange(t *testing.T) {
	f := benchFullNode(t, 100) // every one checked at the fake clock's now
	src := f.consoleSrc
	now := f.clk.Now().UnixMilli()
	key := func(i int) string { return fmt.Sprintf("host%d.example/group%d/repo%d", i%7, i%100, i) }
	st := func(i int, lastCheck int64, errText string, class repostate.Class) *fleetv1.RepoState {
		state := "ok"
		if errText != "" {
			state = "failing"
		}
		return &fleetv1.RepoState{Key: key(i), Url: "https://" + key(i), State: state, LastCheckMs: lastCheck, LastError: errText,
			Class: uint32(class), Digest: fmt.Sprintf("d%d", i)}
	}
	states := func(rs ...*fleetv1.RepoState) { // checked, and verified by the full node, then
		f.states(rs)
		for _, r := range rs {
			forceVerified(f, r.GetKey(), r.GetLastCheckMs())
		}
		f.reclass(stateKeys(rs)...)
	}
	states(
		st(5, now-2*time.Hour.Milliseconds(), "git ls-remote: timeout: no answer", repostate.ClassTimeout),
		st(6, now-3*time.Hour.Milliseconds(), "git fetch: network: connection refused", repostate.ClassUnreachable),
		st(7, now-8*24*time.Hour.Milliseconds(), "git fetch: network: could not resolve host", repostate.ClassUnreachable),
		st(8, 0, "", repostate.NoClass),
	)
	ov := src.Overview(series.Day)
	// under 10m, 10m-1h, 1h-6h, 6h-1d, 1d-7d, over 7d, never
	if want := []int{96, 0, 2, 0, 0, 1, 1}; !slices.Equal(ov.Staleness, want) {
		t.Errorf("staleness %v, want %v", ov.Staleness, want)
	}
	// The bench node's failing repositories (1 in 10) have no error text.
	if want := map[string]int{"timeout": 1, "upstream unreachable": 2}; fmt.Sprint(ov.Errors) != fmt.Sprint(want) {
		t.Errorf("errors %v, want %v", ov.Errors, want)
	}
	// The stalest first, never checked before all.
	p := src.Repos(t.Context(), console.Query{StaleOver: time.Hour, Limit: 10})
	if got, want := keysOf(p), []string{key(8), key(7), key(6), key(5)}; !slices.Equal(got, want) {
		t.Errorf("stale over 1h: %v, want %v", got, want)
	}
	if got := keysOf(src.Repos(t.Context(), console.Query{Never: true, Limit: 10})); !slices.Equal(got, []string{key(8)}) {
		t.Errorf("never checked: %v", got)
	}
	if got := keysOf(src.Repos(t.Context(), console.Query{StaleOver: time.Hour, Search: "REPO6", State: new(repostate.Failing), Limit: 10})); !slices.Equal(got, []string{key(6)}) {
		t.Errorf("stale, failing, searched: %v", got)
	}
	// Checked again: back in the first bucket, its error gone.
	states(st(5, now, "", repostate.NoClass), st(7, now, "", repostate.NoClass))
	f.removed(context.Background(), []string{key(6)})
	ov = src.Overview(series.Day)
	if want := []int{98, 0, 0, 0, 0, 0, 1}; !slices.Equal(ov.Staleness, want) {
		t.Errorf("staleness after new checks %v, want %v", ov.Staleness, want)
	}
	if len(ov.Errors) != 0 {
		t.Errorf("errors after new checks: %v", ov.Errors)
	}
	if got := keysOf(src.Repos(t.Context(), console.Query{StaleOver: time.Hour, Limit: 10})); !slices.Equal(got, []string{key(8)}) {
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

// The full node samples the share current and the disk into its series
// every minute, counts the checks, fetches and failures that the states
// tell of, and the bytes of git it serves; a restarted node draws them at
// once, from its store.
func TestTheConsolesSeriesIsSampledEveryMinuteAndOutlastsARestart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1e9, 0))
	log := slog.New(slog.DiscardHandler)
	open := func() *Node {
		t.Helper()
		f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: dir, Fetchers: 1}}, log, clk)
		if err != nil {
			t.Fatal(err)
		}
		f.tunnels = tunnel.NewServer(f.creds.authenticate, log, nil)
		return f
	}
	f := open()
	st := func(i int, checks, fetches uint64, lastCheck int64, errText string) *fleetv1.RepoState {
		k := fmt.Sprintf("example.org/g/r%d", i)
		return &fleetv1.RepoState{Key: k, Url: "https://" + k, Owner: 7, State: "ok", Digest: fmt.Sprintf("d%d", i), LastCheckMs: lastCheck,
			Checks: checks, Fetches: fetches, LastError: errText}
	}
	var rs []*fleetv1.RepoState
	for i := range 10 {
		rs = append(rs, st(i, 5, 1, 1e12, ""))
	}
	f.states(rs) // the first states of a start count nothing: they are what was
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.seriesLoop(ctx) }()
	sampled := func(g *Node) int {
		n := 0
		for _, b := range g.series.Window(series.Day, clk.Now(), 0) {
			if b.Sampled {
				n++
			}
		}
		return n
	}
	// Advance until three minutes were sampled: the loop may not be
	// waiting yet when the clock first moves.
	deadline := time.Now().Add(30 * time.Second)
	for sampled(f) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("sampled minutes after 30 s: %d", sampled(f))
		}
		clk.Advance(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	// Two checks of r1, one a fetch; a failed check of r2.
	f.states([]*fleetv1.RepoState{st(1, 7, 2, 1e12+1, ""), st(2, 6, 1, 1e12+1, "git ls-remote: timeout")})
	cancel()
	<-done
	want := func(g *Node) series.Counts {
		var c series.Counts
		for _, b := range g.consoleSrc.Overview(series.Day).Trend {
			c.Add(b.Counts)
		}
		return c
	}
	got := want(f)
	if got.Checks != 3 || got.Fetches != 1 || got.Failures != 1 {
		t.Errorf("counted %+v, want 3 checks, 1 fetch, 1 failure", got)
	}
	day := f.consoleSrc.Overview(series.Day).Trend
	last := day[len(day)-1] // the last 5 minutes, with the last sample
	if !last.Sampled || last.Total != 10 || last.Current != uint64(f.totals().current) {
		t.Errorf("the last sample: %+v, want 10 repositories, %d current", last, f.totals().current)
	}
	f.n.TestHooks().Close()

	// A restart: the figures are there before the first minute passes.
	g := open()
	t.Cleanup(g.n.TestHooks().Close)
	if err := g.loadSeries(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := sampled(g); n != sampled(f) || want(g) != got {
		t.Errorf("after a restart: %d minutes sampled, counts %+v; want %d and %+v", n, want(g), sampled(f), got)
	}
	if again := g.consoleSrc.Overview(series.Day).Trend; again[len(again)-1] != last {
		t.Errorf("the last minute after a restart: %+v, want %+v", again[len(again)-1], last)
	}
}

// What the public is served of git is counted in the series.
func TestTheConsolesSeriesCountsTheBytesServed(t *testing.T) {
	f := benchFullNode(t, 1)
	count := f.countServed(func(int) {})
	count(1000)
	count(24)
	var served uint64
	for _, b := range f.series.Window(series.Week, f.clk.Now(), 0) {
		served += b.ServedBytes
	}
	if served != 1024 {
		t.Errorf("%d bytes served in the series, want 1024", served)
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
		{StaleOver: time.Nanosecond, State: new(repostate.Unplaceable), Limit: 50}, // no repository has it
		{Search: "repo", State: new(repostate.Unplaceable), Limit: 50},
	} {
		p := src.Repos(t.Context(), q)
		if len(p.Repos) != 0 || !p.More {
			t.Errorf("%+v: %d repositories, more %v; want none, and more", q, len(p.Repos), p.More)
		}
	}
}

// A repository's public status is its listing's, with no git: a key the
// view does not hold has none. Its detail says what the full node knows
// of its copy: no copy on disk, no size; and its log pages as the API's.
func TestConsoleStatusDetailAndLogOfARepository(t *testing.T) {
	f := benchFullNode(t, 10)
	src := f.consoleSrc
	key := "host1.example/group1/repo1"
	r, ok := src.Status(key)
	f.mu.Lock()
	st := f.view.Get(repokey.Key(key))
	f.mu.Unlock()
	want := f.backend.repo(repokey.Key(key), st, f.clk.Now())
	if !ok || fmt.Sprint(r) != fmt.Sprint(want) {
		t.Errorf("status %+v, want the listing's %+v", r, want)
	}
	for _, k := range []string{"example.org/not/mirrored", "host1.example/group1/<repo1>"} {
		if _, ok := src.Status(k); ok {
			t.Errorf("%s has a status", k)
		}
	}
	d, ok := src.GetRepo(context.Background(), key)
	if !ok || d.Size != -1 || !d.NextCheck.IsZero() || !d.LastSuccess.IsZero() {
		t.Errorf("detail of a repository with no copy and no log: %+v", d)
	}
	at := f.clk.Now()
	for i := range 30 {
		f.flog.Append(fetchlog.Entry{Key: key, At: at.Add(time.Duration(i) * time.Second), Kind: "pull", Result: fetchlog.ResultOK})
	}
	f.flog.Append(fetchlog.Entry{Key: key, At: at.Add(time.Minute), Kind: "check", Result: fetchlog.ResultFailed, Error: "timeout"})
	page, next, err := src.Log(context.Background(), key, "", 25)
	if err != nil || len(page) != 25 || next == "" || page[0].Result != fetchlog.ResultFailed {
		t.Fatalf("the first page: %d entries, next %q, err %v", len(page), next, err)
	}
	rest, last, err := src.Log(context.Background(), key, next, 25)
	if err != nil || len(rest) != 6 || last != "" {
		t.Errorf("the second page: %d entries, next %q, err %v", len(rest), last, err)
	}
	if d, _ := src.GetRepo(context.Background(), key); !d.LastSuccess.Equal(at.Add(29 * time.Second).UTC()) {
		t.Errorf("the last success: %s, want the newest pull's start (%s), not the failed check after it", d.LastSuccess, at.Add(29*time.Second))
	}
}
