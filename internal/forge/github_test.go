package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

// ghServer speaks GitHub's GraphQL API as far as the feed uses it: it
// parses the query's aliased repository lookups and their variables,
// answers pushedAt and nameWithOwner, NOT_FOUND errors for unknown
// repositories, rateLimit in the body and GitHub's rate-limit headers,
// and can be told to misbehave.
type ghServer struct {
	clk   *clock.Fake
	limit int

	mu      sync.Mutex
	repos   map[string]ghRepo // by lower-case "owner/name"
	tokens  map[string]*ghToken
	mode    string // "", "garbage", "500", "oversized", "secondary", "echo"
	poll    int    // X-Poll-Interval in seconds, 0: not sent
	used    []string
	aliases []int // aliases in each query answered
	costs   []int // rateLimit.cost of each query answered
	bytesIn int64
	bytesOK int64
}

type ghRepo struct {
	nameWithOwner string
	pushedAt      time.Time
	parent        string // a fork's parent's nameWithOwner; any string, as a hostile server may send
	// defaultBranch is defaultBranchRef's name ("": null, an empty
	// repository); any string, as a hostile server may send.
	defaultBranch      string
	archived, disabled bool
	id                 int64 // databaseId (0: null, as a hostile server may send)
}

type ghToken struct {
	remaining int
	reset     time.Time
}

func newGHServer(t testing.TB, clk *clock.Fake, tokens ...string) (*ghServer, *httptest.Server) {
	g := &ghServer{clk: clk, limit: 5000, repos: map[string]ghRepo{}, tokens: map[string]*ghToken{}}
	for _, tok := range tokens {
		g.tokens[tok] = &ghToken{remaining: g.limit, reset: clk.Now().Add(time.Hour)}
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

func (g *ghServer) add(nameWithOwner string, pushed time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.repos[strings.ToLower(nameWithOwner)] = ghRepo{nameWithOwner: nameWithOwner, pushedAt: pushed}
}

// fork makes nameWithOwner a fork whose parent is answered as parent.
func (g *ghServer) fork(nameWithOwner, parent string, pushed time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.repos[strings.ToLower(nameWithOwner)] = ghRepo{nameWithOwner: nameWithOwner, pushedAt: pushed, parent: parent}
}

// rename makes old answer as the repository now called to.
func (g *ghServer) rename(old, to string, pushed time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.repos[strings.ToLower(old)] = ghRepo{nameWithOwner: to, pushedAt: pushed, id: 77}
}

func (g *ghServer) setMode(m string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode = m
}

func (g *ghServer) setRemaining(tok string, n int, reset time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tokens[tok] = &ghToken{remaining: n, reset: reset}
}

func (g *ghServer) requests() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.used)
}

func (g *ghServer) usedTokens() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.used...)
}

var ghAlias = regexp.MustCompile(`(r[0-9]+): repository\(owner: \$(o[0-9]+), name: \$(n[0-9]+)\) \{ pushedAt nameWithOwner parent \{ nameWithOwner \} defaultBranchRef \{ name \} isArchived isDisabled databaseId \}`)

func (g *ghServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if r.Method != http.MethodPost || r.URL.Path != "/graphql" {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	tokText, ok := strings.CutPrefix(r.Header.Get("Authorization"), "bearer ")
	tok := g.tokens[tokText]
	if !ok || tok == nil || r.Header.Get("User-Agent") == "" {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/graphql"}`)
		return
	}
	g.used = append(g.used, tokText)
	body, _ := io.ReadAll(r.Body)
	g.bytesIn += int64(len(body))
	now := g.clk.Now()
	if !now.Before(tok.reset) {
		tok.remaining, tok.reset = g.limit, now.Add(time.Hour)
	}
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(g.limit))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(tok.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "graphql")
	switch g.mode {
	case "garbage":
		io.WriteString(w, "<html><body>Unicorn!</body></html>")
		return
	case "500":
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"message":"Server Error"}`)
		return
	case "echo": // an error that quotes the request's credentials
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, `{"message":"upstream refused bearer %s"}`, tokText)
		return
	case "oversized":
		io.WriteString(w, `{"data":{"pad":"`+strings.Repeat("x", 9<<20)+`"}}`)
		return
	case "primary403": // the REST form of a spent primary limit
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", strconv.Itoa(g.limit))
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
		return
	case "secondary":
		h.Set("Retry-After", "120")
		h.Set("X-RateLimit-Remaining", strconv.Itoa(tok.remaining))
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/graphql/overview/rate-limits-and-node-limits-for-the-graphql-api#secondary-rate-limits"}`)
		return
	}
	if tok.remaining <= 0 {
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", strconv.Itoa(g.limit))
		io.WriteString(w, `{"errors":[{"type":"RATE_LIMITED","code":"graphql_rate_limit","message":"API rate limit already exceeded for user ID 1."}]}`)
		return
	}
	var req struct {
		Query     string            `json:"query"`
		Variables map[string]string `json:"variables"`
	}
	if err := json.Unmarshal(body, &req); err != nil || !strings.HasPrefix(req.Query, "query(") {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"message":"Problems parsing JSON"}`)
		return
	}
	tok.remaining--
	h.Set("X-RateLimit-Remaining", strconv.Itoa(tok.remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(g.limit-tok.remaining))
	if g.poll > 0 {
		h.Set("X-Poll-Interval", strconv.Itoa(g.poll))
	}
	// GitHub's cost: 1 point for a query whose connections (first:,
	// last:) ask for no more than 100 nodes; objects such as parent are
	// free.
	cost := 1 + strings.Count(req.Query, "first:") + strings.Count(req.Query, "last:")
	g.costs = append(g.costs, cost)
	data := map[string]any{"rateLimit": map[string]any{
		"cost": cost, "remaining": tok.remaining, "resetAt": tok.reset.UTC().Format(time.RFC3339), "limit": g.limit,
	}}
	var errs []map[string]any
	matches := ghAlias.FindAllStringSubmatch(req.Query, -1)
	g.aliases = append(g.aliases, len(matches))
	for _, m := range matches {
		owner, name := req.Variables[m[2]], req.Variables[m[3]]
		repo, ok := g.repos[strings.ToLower(owner+"/"+name)]
		if !ok {
			data[m[1]] = nil
			errs = append(errs, map[string]any{
				"type": "NOT_FOUND", "path": []string{m[1]},
				"locations": []map[string]int{{"line": 1, "column": 10}},
				"message":   fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, name),
			})
			continue
		}
		var pushed any
		if !repo.pushedAt.IsZero() {
			pushed = repo.pushedAt.UTC().Format(time.RFC3339)
		}
		var parent any
		if repo.parent != "" {
			parent = map[string]any{"nameWithOwner": repo.parent}
		}
		var head any
		if repo.defaultBranch != "" {
			head = map[string]any{"name": repo.defaultBranch}
		}
		data[m[1]] = map[string]any{"pushedAt": pushed, "nameWithOwner": repo.nameWithOwner, "parent": parent,
			"defaultBranchRef": head, "isArchived": repo.archived, "isDisabled": repo.disabled, "databaseId": repo.id}
	}
	out := map[string]any{"data": data}
	if errs != nil {
		out["errors"] = errs
	}
	b, _ := json.Marshal(out)
	g.bytesOK += int64(len(b))
	w.Write(b)
}

// testClient makes a client of kind for srv on the fake clock, logging
// into logs.
func testClient(t testing.TB, kind Kind, srv *httptest.Server, clk *clock.Fake, logs io.Writer, tokens ...string) Client {
	if logs == nil {
		logs = io.Discard
	}
	return testClientOpt(t, kind, srv, Options{
		Clock: clk, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, tokens...)
}

// testClientOpt makes a client with opt, unpaced unless opt says.
func testClientOpt(t testing.TB, kind Kind, srv *httptest.Server, opt Options, tokens ...string) Client {
	t.Helper()
	api, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var toks []Token
	for _, s := range tokens {
		toks = append(toks, NewToken(s))
	}
	opt.HTTPClient = srv.Client()
	if opt.Pace == 0 {
		opt.Pace = -1
	}
	c, err := New(Forge{Host: string(kind) + ".example", Kind: kind, API: api}, toks, opt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ghLookup(t testing.TB, srv *httptest.Server, clk *clock.Fake, logs io.Writer, tokens ...string) Lookup {
	return testClient(t, GitHub, srv, clk, logs, tokens...).(Lookup)
}

// ask splits paths into the client's batches, as a caller does.
func ask(ctx context.Context, l Lookup, paths []string) (Answer, error) {
	var all Answer
	for len(paths) > 0 {
		n := min(l.BatchSize(), len(paths))
		a, err := l.PushedAt(ctx, paths[:n])
		if err != nil {
			return all, err
		}
		all.Pushed = append(all.Pushed, a.Pushed...)
		all.Missing = append(all.Missing, a.Missing...)
		all.Renamed = append(all.Renamed, a.Renamed...)
		paths = paths[n:]
	}
	return all, nil
}

func TestGitHubAsksAHundredRepositoriesAQuery(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1")
	var paths []string
	for i := range 250 {
		p := fmt.Sprintf("Owner%d/repo.%d", i%7, i)
		gh.add(p, t0.Add(-time.Duration(i)*time.Minute))
		paths = append(paths, strings.ToLower(p))
	}
	l := ghLookup(t, srv, clk, nil, "test-token-1")
	a, err := ask(context.Background(), l, paths)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gh.aliases) != "[100 100 50]" {
		t.Errorf("queries asked %v repositories, want [100 100 50]", gh.aliases)
	}
	if len(a.Pushed) != 250 || len(a.Missing) != 0 || len(a.Renamed) != 0 {
		t.Fatalf("answer: %d pushed, %d missing, %d renamed; want 250, 0, 0", len(a.Pushed), len(a.Missing), len(a.Renamed))
	}
	times, refused := PushTimes(repokey.Folding{}, "github.com", a)
	if refused != 0 {
		t.Errorf("%d refused", refused)
	}
	if got, want := times["github.com/owner3/repo.3"], t0.Add(-3*time.Minute); !got.Equal(want) {
		t.Errorf("push of owner3/repo.3 = %v, want %v", got, want)
	}
	if _, err := l.PushedAt(context.Background(), make([]string, 101)); err == nil {
		t.Error("a lookup of 101 repositories was accepted")
	}
}

func TestGitHubMissingRepositoryIsNotAChange(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1")
	gh.add("a/kept", t0.Add(-time.Hour))
	gh.add("a/empty", time.Time{}) // never pushed
	a, err := ghLookup(t, srv, clk, nil, "test-token-1").PushedAt(context.Background(), []string{"a/kept", "a/gone", "a/empty"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.Missing) != "[a/gone]" {
		t.Errorf("missing = %v, want [a/gone]", a.Missing)
	}
	times, _ := PushTimes(repokey.Folding{}, "github.com", a)
	if len(times) != 1 || times["github.com/a/kept"].IsZero() {
		t.Errorf("push times = %v, want a/kept only (a missing or never pushed repository is not a change)", times)
	}
}

func TestGitHubRenamedRepositoryIsReportedNotPushed(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1")
	gh.add("Same/Case", t0)
	gh.rename("old/name", "new-owner/new-name", t0.Add(-time.Minute))
	a, err := ghLookup(t, srv, clk, nil, "test-token-1").PushedAt(context.Background(), []string{"same/case", "old/name"})
	if err != nil {
		t.Fatal(err)
	}
	want := Rename{From: "old/name", To: "new-owner/new-name", At: t0.Add(-time.Minute)}
	if len(a.Renamed) != 1 || a.Renamed[0] != want {
		t.Errorf("renamed = %v, want [%v]", a.Renamed, want)
	}
	if len(a.Pushed) != 1 || a.Pushed[0].Path != "same/case" {
		t.Errorf("pushed = %v, want same/case only (a name differing in case is the same repository)", a.Pushed)
	}
	// The stable number comes with the rename (the asked path), and a
	// databaseId of 0 (null) is none.
	if len(a.IDs) != 1 || a.IDs[0] != (RepoID{Path: "old/name", ID: 77}) {
		t.Errorf("ids = %v, want old/name's 77 only", a.IDs)
	}
}

func TestGitHubReportsAForksParentAtNoExtraCost(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1")
	gh.add("Up/Stream", t0)
	gh.fork("someone/fork", "Up/Stream", t0)
	gh.add("someone/plain", t0)
	// Hostile answers: a parent on another host, a malformed name, the
	// repository itself.
	gh.fork("evil/host", "https://evil.example/x/y", t0)
	gh.fork("evil/malformed", "../..", t0)
	gh.fork("evil/self", "Evil/Self", t0)
	a, err := ghLookup(t, srv, clk, nil, "test-token-1").PushedAt(context.Background(),
		[]string{"up/stream", "someone/fork", "someone/plain", "evil/host", "evil/malformed", "evil/self"})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Pushed) != 6 {
		t.Errorf("pushed %v, want all 6 (a parent changes nothing of the push times)", a.Pushed)
	}
	parents, refused := Parents(repokey.Folding{}, "github.com", a)
	want := map[string]string{"github.com/someone/fork": "github.com/up/stream"}
	if fmt.Sprint(parents) != fmt.Sprint(want) || refused != 3 {
		t.Errorf("parents %v (refused %d), want %v and 3 refused", parents, refused, want)
	}
	if fmt.Sprint(gh.costs) != "[1]" || gh.requests() != 1 {
		t.Errorf("costs %v in %d requests, want one query of 1 point", gh.costs, gh.requests())
	}
}

// The default branch and the archived and disabled flags come with the
// push times, in the same query at the same cost; a branch name git could
// not store, or one that carries a token, is left out.
func TestGitHubReportsTheDefaultBranchAndFlagsAtNoExtraCost(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1")
	set := func(name, branch string, archived, disabled bool) {
		gh.mu.Lock()
		gh.repos[strings.ToLower(name)] = ghRepo{nameWithOwner: name, pushedAt: t0, defaultBranch: branch, archived: archived, disabled: disabled}
		gh.mu.Unlock()
	}
	set("o/trunk", "trunk", false, false)
	set("o/empty", "", false, false)
	set("o/old", "main", true, false)
	set("o/off", "main", false, true)
	set("evil/dots", "../../etc", false, false)
	set("evil/token", "x-test-token-1", false, false)
	a, err := ghLookup(t, srv, clk, nil, "test-token-1").PushedAt(context.Background(),
		[]string{"o/trunk", "o/empty", "o/old", "o/off", "evil/dots", "evil/token"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Head{{"o/trunk", "trunk"}, {"o/old", "main"}, {"o/off", "main"}}
	if fmt.Sprint(a.Heads) != fmt.Sprint(want) {
		t.Errorf("heads %v, want %v", a.Heads, want)
	}
	wantFlags := []Flag{{Path: "o/old", Archived: true}, {Path: "o/off", Disabled: true}}
	if fmt.Sprint(a.Flags) != fmt.Sprint(wantFlags) {
		t.Errorf("flags %v, want %v", a.Flags, wantFlags)
	}
	if a.Refused != 1 {
		t.Errorf("refused %d, want 1 (the branch that carries the token)", a.Refused)
	}
	if fmt.Sprint(gh.costs) != "[1]" || gh.requests() != 1 {
		t.Errorf("costs %v in %d requests, want one query of 1 point", gh.costs, gh.requests())
	}
}

func TestValidBranchRefusesWhatGitWouldNotStore(t *testing.T) {
	for _, ok := range []string{"main", "release/1.0", "feature-x", "v2_dev", "ümlaut"} {
		if !ValidBranch(ok) {
			t.Errorf("ValidBranch(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "-x", "/x", "x/", ".x", "x.", "a..b", "a//b", "a/.b", "x.lock", "a b", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a\\b", "a@{b", "@", "a\x7fb", "a\nb", strings.Repeat("x", 256)} {
		if ValidBranch(bad) {
			t.Errorf("ValidBranch(%q) = true", bad)
		}
	}
}

func TestGitHubQueryCarriesNamesAsVariablesAndSkipsImpossibleNames(t *testing.T) {
	body, asked := githubQuery([]string{`a/b`, `x"){ viewer { login } }/y`, `a/b/c`, `-/..`, `o_o/n`, `o/n_.-1`})
	if fmt.Sprint(asked) != "[a/b o/n_.-1]" {
		t.Errorf("asked %v, want [a/b o/n_.-1]", asked)
	}
	var q struct {
		Query     string
		Variables map[string]string
	}
	if err := json.Unmarshal(body, &q); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(q.Query, `"`) || q.Variables["o1"] != "o" || q.Variables["n1"] != "n_.-1" {
		t.Errorf("query %q with variables %v: names must be variables only", q.Query, q.Variables)
	}
}

func TestGitHubSpentLimitIsWaitedOut(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1")
	gh.add("a/b", t0)
	reset := t0.Add(40 * time.Minute)
	gh.setRemaining("test-token-1", 1, reset)
	l := ghLookup(t, srv, clk, nil, "test-token-1")
	ctx := context.Background()

	// The last point is spent on a good answer: it counts, and the body's
	// rateLimit.remaining 0 sets the token aside until its reset.
	if a, err := l.PushedAt(ctx, []string{"a/b"}); err != nil || len(a.Pushed) != 1 {
		t.Fatalf("last point: %v, %v", a, err)
	}
	_, err := l.PushedAt(ctx, []string{"a/b"})
	var we *WaitError
	if !errors.As(err, &we) || !we.Limited || !we.Until.Equal(reset) {
		t.Fatalf("after the last point: %v, want a WaitError until %v", err, reset)
	}
	if n := gh.requests(); n != 1 {
		t.Errorf("%d requests, want 1: a spent limit is not asked again", n)
	}
	if got := l.Ready(clk.Now()); !got.Equal(reset) {
		t.Errorf("Ready = %v, want the reset %v", got, reset)
	}
	clk.Set(reset)
	if a, err := l.PushedAt(ctx, []string{"a/b"}); err != nil || len(a.Pushed) != 1 {
		t.Fatalf("after the reset: %v, %v", a, err)
	}
}

func TestGitHubRateLimitedAnswerWaitsForTheHeadersReset(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1")
	gh.add("a/b", t0)
	reset := t0.Add(25 * time.Minute)
	gh.setRemaining("test-token-1", 0, reset)
	l := ghLookup(t, srv, clk, nil, "test-token-1")
	_, err := l.PushedAt(context.Background(), []string{"a/b"})
	var we *WaitError
	if !errors.As(err, &we) || !we.Limited || !we.Until.Equal(reset) {
		t.Fatalf("RATE_LIMITED answer: %v, want a WaitError until %v", err, reset)
	}
	clk.Set(reset.Add(-time.Second))
	if _, err := l.PushedAt(context.Background(), []string{"a/b"}); !errors.As(err, &we) || gh.requests() != 1 {
		t.Fatalf("a second before the reset: %v after %d requests, want a WaitError and no request", err, gh.requests())
	}
	clk.Set(reset)
	if a, err := l.PushedAt(context.Background(), []string{"a/b"}); err != nil || len(a.Pushed) != 1 {
		t.Fatalf("at the reset: %v, %v", a, err)
	}
}

func TestGitHubForbiddenWithNothingRemainingWaitsForTheReset(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1")
	gh.add("a/b", t0)
	reset := t0.Add(50 * time.Minute)
	gh.setRemaining("test-token-1", 10, reset)
	gh.setMode("primary403")
	l := ghLookup(t, srv, clk, nil, "test-token-1")
	_, err := l.PushedAt(context.Background(), []string{"a/b"})
	var we *WaitError
	if !errors.As(err, &we) || !we.Limited || !we.Until.Equal(reset) {
		t.Fatalf("403 with X-RateLimit-Remaining 0: %v, want a WaitError until X-RateLimit-Reset %v", err, reset)
	}
}

func TestGitHubSecondaryLimitWaitsForRetryAfterAndUsesAnotherToken(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1", "test-token-2")
	gh.add("a/b", t0)
	gh.setMode("secondary")
	l := ghLookup(t, srv, clk, nil, "test-token-1", "test-token-2")
	_, err := l.PushedAt(context.Background(), []string{"a/b"})
	var we *WaitError
	if !errors.As(err, &we) || !we.Limited || !we.Until.Equal(t0.Add(120*time.Second)) {
		t.Fatalf("secondary limit on both tokens: %v, want a WaitError until Retry-After (120 s)", err)
	}
	if got := gh.usedTokens(); fmt.Sprint(got) != "[test-token-1 test-token-2]" {
		t.Errorf("tokens used %v, want each once", got)
	}
	gh.setMode("")
	clk.Advance(119 * time.Second)
	if _, err := l.PushedAt(context.Background(), []string{"a/b"}); !errors.As(err, &we) {
		t.Fatalf("before Retry-After: %v, want a WaitError", err)
	}
	clk.Advance(time.Second)
	if a, err := l.PushedAt(context.Background(), []string{"a/b"}); err != nil || len(a.Pushed) != 1 {
		t.Fatalf("after Retry-After: %v, %v", a, err)
	}
}

func TestGitHubTokensAreUsedInTurnAndASpentOneIsSkipped(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1", "test-token-2", "test-token-3")
	gh.add("a/b", t0)
	l := ghLookup(t, srv, clk, nil, "test-token-1", "test-token-2", "test-token-3", "test-token-unknown")
	for range 4 {
		if _, err := l.PushedAt(context.Background(), []string{"a/b"}); err != nil {
			t.Fatal(err)
		}
	}
	// The unknown token is refused (401) and rests; its request is
	// answered with the next token.
	want := "[test-token-1 test-token-2 test-token-3 test-token-1]"
	if got := fmt.Sprint(gh.usedTokens()); got != want {
		t.Errorf("tokens used %s, want %s", got, want)
	}
	gh.setRemaining("test-token-2", 0, t0.Add(time.Hour))
	for range 4 {
		if _, err := l.PushedAt(context.Background(), []string{"a/b"}); err != nil {
			t.Fatal(err)
		}
	}
	want = "[test-token-2 test-token-3 test-token-1 test-token-3 test-token-1]"
	if got := fmt.Sprint(gh.usedTokens()[4:]); got != want {
		t.Errorf("with token 2 spent, tokens used %s, want %s", got, want)
	}
}

func TestGitHubBadAnswersChangeNothingAndBackOff(t *testing.T) {
	for _, mode := range []string{"garbage", "500", "oversized", "echo"} {
		t.Run(mode, func(t *testing.T) {
			clk := clock.NewFake(t0)
			gh, srv := newGHServer(t, clk, "test-token-1")
			gh.add("a/b", t0)
			gh.setMode(mode)
			l := ghLookup(t, srv, clk, nil, "test-token-1")
			a, err := l.PushedAt(context.Background(), []string{"a/b"})
			if err == nil || len(a.Pushed)+len(a.Missing)+len(a.Renamed) != 0 {
				t.Fatalf("answer %v, error %v: want nothing and an error", a, err)
			}
			// Errors back off: 10 s, then 20 s.
			if got := l.Ready(clk.Now()); !got.Equal(t0.Add(10 * time.Second)) {
				t.Errorf("Ready after one error = %v, want 10 s later", got)
			}
			var we *WaitError
			if _, err := l.PushedAt(context.Background(), []string{"a/b"}); !errors.As(err, &we) || we.Limited || gh.requests() != 1 {
				t.Errorf("during the backoff: %v after %d requests, want a WaitError and no request", err, gh.requests())
			}
			clk.Advance(10 * time.Second)
			if _, err := l.PushedAt(context.Background(), []string{"a/b"}); err == nil {
				t.Fatal("a second bad answer was accepted")
			}
			if got := l.Ready(clk.Now()); !got.Equal(clk.Now().Add(20 * time.Second)) {
				t.Errorf("Ready after two errors = %v, want 20 s later", got.Sub(clk.Now()))
			}
			gh.setMode("")
			clk.Advance(20 * time.Second)
			if a, err := l.PushedAt(context.Background(), []string{"a/b"}); err != nil || len(a.Pushed) != 1 {
				t.Fatalf("a good answer after the backoff: %v, %v", a, err)
			}
			if got := l.Ready(clk.Now()); !got.Equal(clk.Now()) {
				t.Errorf("a success did not end the backoff: Ready in %v", got.Sub(clk.Now()))
			}
		})
	}
}

func TestTokensNeverAppearInErrorsOrLogs(t *testing.T) {
	const secret = "test-token-secret-1"
	clk := clock.NewFake(t0)
	var logs bytes.Buffer
	var errs []string

	gh, srv := newGHServer(t, clk, secret)
	gh.add("a/b", t0)
	l := ghLookup(t, srv, clk, &logs, "test-token-wrong", secret)
	for _, mode := range []string{"echo", "secondary", "500"} {
		gh.setMode(mode)
		clk.Advance(time.Hour)
		if _, err := l.PushedAt(context.Background(), []string{"a/b"}); err != nil {
			errs = append(errs, err.Error())
		}
	}

	// Gitee puts the token in the query: a connection error must not show it.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	api, _ := url.Parse(dead.URL)
	c, err := New(Forge{Host: "gitee.com", Kind: Gitee, API: api}, []Token{NewToken(secret)}, Options{
		Clock: clk, Pace: -1, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.(Lookup).PushedAt(context.Background(), []string{"a/b"}); err != nil {
		errs = append(errs, err.Error())
	}

	_, _, perr := ParseToken("github.com=" + secret + " x")
	errs = append(errs, perr.Error())
	_, perr = Parse(nil, []string{"nowhere.example=" + secret}, "")
	errs = append(errs, perr.Error())
	_, perr = Parse(nil, nil, "github.com="+secret+",broken")
	errs = append(errs, perr.Error())

	cfg, err := Parse(nil, []string{"github.com=" + secret}, "")
	if err != nil {
		t.Fatal(err)
	}
	tok := cfg.Tokens["github.com"][0]
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "token", tok, "tokens", cfg.Tokens, "cfg", cfg)
	b, _ := json.Marshal(cfg.Tokens)
	shown := []string{
		fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s %q %x", tok, tok, tok, tok, tok, tok),
		fmt.Sprintf("%+v %#v", cfg, cfg), fmt.Sprintf("%+v", tokenState{tok: tok}), string(b),
	}

	if len(errs) < 6 {
		t.Fatalf("only %d errors to look at: %q", len(errs), errs)
	}
	for _, s := range append(append(errs, shown...), logs.String()) {
		if strings.Contains(s, secret) {
			t.Errorf("the token shows in %q", s)
		}
	}
	if !strings.Contains(logs.String(), "token 1 of 2") || !strings.Contains(logs.String(), redacted) {
		t.Errorf("the logs name no token by number, or show no redacted token:\n%s", logs.String())
	}
}

func FuzzGitHubAnswer(f *testing.F) {
	asked := []string{"a/b", "c/d", "e/f"}
	f.Add([]byte(`{"data":{"rateLimit":{"cost":1,"remaining":4999,"resetAt":"2026-11-27T10:00:00Z","limit":5000},` +
		`"r0":{"pushedAt":"2026-11-27T08:00:00Z","nameWithOwner":"a/b"},"r1":null,"r2":{"pushedAt":null,"nameWithOwner":"E/F"}},` +
		`"errors":[{"type":"NOT_FOUND","path":["r1"],"locations":[{"line":1,"column":10}],"message":"Could not resolve to a Repository with the name 'c/d'."}]}`))
	f.Add([]byte(`{"data":{"rateLimit":{"cost":1,"remaining":0,"resetAt":"2026-11-27T10:00:00Z","limit":5000},"r0":{"pushedAt":"2026-11-27T08:00:00Z","nameWithOwner":"x/y"}}}`))
	f.Add([]byte(`{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded"}]}`))
	f.Add([]byte(`{"data":null,"errors":[{"message":"Something went wrong"}]}`))
	f.Add([]byte(`{"data":{"r7":{}}}`))
	f.Add([]byte(`<html>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, _, err := parseGitHub(body, asked, t0)
		if err != nil {
			if len(a.Pushed)+len(a.Missing)+len(a.Renamed) != 0 {
				t.Fatalf("an error with an answer: %v", a)
			}
			return
		}
		isAsked := func(p string) bool { return p == "a/b" || p == "c/d" || p == "e/f" }
		for _, p := range a.Pushed {
			if !isAsked(p.Path) || p.At.IsZero() || p.At.After(t0.Add(maxFutureSkew)) {
				t.Fatalf("pushed %v: not asked, or a bad time", p)
			}
		}
		for _, p := range a.Missing {
			if !isAsked(p) {
				t.Fatalf("missing %q was not asked", p)
			}
		}
		for _, r := range a.Renamed {
			if !isAsked(r.From) || !validPath(r.To, 2) || strings.EqualFold(r.From, r.To) {
				t.Fatalf("bad rename %v", r)
			}
		}
	})
}

// The client shows each token's budget left as the forge last said it,
// and the poll interval the forge asks for; GitHub's GraphQL cannot name a
// repository of three segments, which is never asked about.
func TestGitHubShowsEachTokensBudgetAndThePollInterval(t *testing.T) {
	clk := clock.NewFake(t0)
	gh, srv := newGHServer(t, clk, "test-token-1", "test-token-2")
	gh.add("a/b", t0)
	gh.mu.Lock()
	gh.poll = 60
	gh.mu.Unlock()
	l := ghLookup(t, srv, clk, nil, "test-token-1", "test-token-2")
	if b := l.Budgets(); len(b) != 2 || b[0].Remaining != -1 || b[1].Remaining != -1 {
		t.Fatalf("budgets before any answer: %+v; want two, unknown", b)
	}
	for range 3 {
		if _, err := l.PushedAt(context.Background(), []string{"a/b"}); err != nil {
			t.Fatal(err)
		}
	}
	b := l.Budgets()
	if len(b) != 2 || b[0].Remaining != 4998 || b[1].Remaining != 4999 || b[0].Limit != 5000 || b[0].Name != "token 1 of 2" {
		t.Errorf("budgets after 3 requests in turn: %+v; want 4998 and 4999 of 5000 left", b)
	}
	if got := l.PollInterval(); got != time.Minute {
		t.Errorf("PollInterval = %v, want X-Poll-Interval's 1m", got)
	}
	for path, want := range map[string]bool{"a/b": true, "group/sub/project": false, "a": false, "a/b.c": true} {
		if got := l.Askable(path); got != want {
			t.Errorf("Askable(%q) = %v, want %v", path, got, want)
		}
	}
}
