package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/metrics/metricstest"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// limitingForge is GitHub's GraphQL endpoint as the feed meets it: it
// answers every repository asked (pushed long ago), with GitHub's
// rate-limit headers on the test's clock, and counts the requests; told
// to limit, it answers 429 with nothing remaining until a reset six hours
// ahead, as a forge whose limit an operator's other uses spent.
type limitingForge struct {
	clk *clock.Fake

	mu       sync.Mutex
	limiting bool
	requests int
	asked    map[string]int // "owner/name" -> asks
}

func (g *limitingForge) setLimiting(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limiting = on
}

func (g *limitingForge) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.requests
}

func (g *limitingForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query     string            `json:"query"`
		Variables map[string]string `json:"variables"`
	}
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/api/graphql" || json.Unmarshal(body, &req) != nil {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.requests++
	now := g.clk.Now()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-RateLimit-Limit", "5000")
	if g.limiting {
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(6*time.Hour).Unix(), 10))
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"message":"API rate limit exceeded"}`)
		return
	}
	remaining := 5000 - g.requests
	reset := now.Add(time.Hour)
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	data := map[string]any{"rateLimit": map[string]any{"cost": 1, "remaining": remaining, "limit": 5000,
		"resetAt": reset.UTC().Format(time.RFC3339)}}
	for _, m := range graphQLAlias.FindAllStringSubmatch(req.Query, -1) {
		path := req.Variables[m[2]] + "/" + req.Variables[m[3]]
		g.asked[path]++
		data[m[1]] = map[string]any{"pushedAt": now.Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339), "nameWithOwner": path}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// feedFixture is a coordinator on a fake clock with a GitHub feed asking
// a limitingForge, one owner, and keys on github.com.
type feedFixture struct {
	c     *Coordinator
	clk   *clock.Fake
	gh    *limitingForge
	reg   metrics.Registry
	feed  *feedHost
	owner *session
}

func newFeedFixture(t *testing.T, feeds FeedConfig, keys []string) *feedFixture {
	t.Helper()
	clk := clock.NewFake(time.Unix(1.7e9, 0))
	gh := &limitingForge{clk: clk, asked: map[string]int{}}
	srv := httptest.NewServer(gh)
	t.Cleanup(srv.Close)
	api, err := url.Parse(srv.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	feeds.Forges = forge.Config{
		Forges: map[string]forge.Forge{"github.com": {Host: "github.com", Kind: forge.GitHub, API: api}},
		Tokens: map[string][]forge.Token{"github.com": {forge.NewToken("feed-token")}}}
	feeds.Client = forge.Options{HTTPClient: srv.Client()}
	dir := t.TempDir()
	reg := metrics.NewRegistry()
	cfg := Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), JoinToken: testJoin, FullToken: testFull,
		Feeds: feeds, Metrics: reg}
	cfg.met = newCoordMetrics(reg)
	c, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	node := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "owner", Capacity: 1})
	for _, k := range keys {
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + k}); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	connect(c, full)
	owner := connect(c, node)
	c.placing = true
	c.setMembers()
	c.decide()
	c.mu.Unlock()
	fs := c.startFeeds()
	if len(fs) != 1 {
		t.Fatalf("%d feeds, want github.com's", len(fs))
	}
	return &feedFixture{c: c, clk: clk, gh: gh, reg: reg, feed: fs[0], owner: owner}
}

// run drives the feed as runFeed does, on the fake clock, for d: it asks
// when its client is ready and looks at its coverage, at the budget's
// pace (every request of the budget a tick).
func (x *feedFixture) run(t *testing.T, d time.Duration) {
	t.Helper()
	every := time.Duration(float64(time.Hour) / x.feed.perHour)
	for end := x.clk.Now().Add(d); x.clk.Now().Before(end); x.clk.Advance(every) {
		now := x.clk.Now()
		if !x.feed.client.Ready(now).After(now) {
			_, _ = x.c.askFeed(context.Background(), x.feed, now)
		}
		x.c.feedCoverage(x.feed, x.clk.Now())
	}
}

// fed drains the owner's session and returns what its Assigns said of
// each key's fed state, the last word of each.
func (x *feedFixture) fed() map[string]bool {
	x.c.mu.Lock()
	defer x.c.mu.Unlock()
	out := map[string]bool{}
	for {
		msgs := x.owner.next()
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			for _, r := range m.GetAssign().GetRepos() {
				out[r.GetKey()] = r.GetFed()
			}
		}
	}
}

func (x *feedFixture) status() *fleetv1.FeedStatus {
	x.c.mu.Lock()
	defer x.c.mu.Unlock()
	return x.c.feedStatus(true)
}

func quietKeys(n int) []string {
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("github.com/o/r%02d", i))
	}
	return keys
}

// A forge that answers 429 for hours holds its feed back: once past
// --fed-max-age, its repositories are no longer fed (their owner is told,
// and checks them as unfed), and the feed is limited, with its metric.
// A key of three segments on the GitHub host is never asked about nor fed,
// and is counted as unaskable.
func TestAFeedHeldByARateLimitStopsCoveringItsRepositories(t *testing.T) {
	const unaskable = "github.com/group/sub/project"
	keys := quietKeys(12)
	x := newFeedFixture(t, FeedConfig{FedMaxAge: 10 * time.Minute}, append(keys, unaskable))
	x.fed() // the first assignments, before any answer

	x.run(t, 5*time.Minute)
	fed := x.fed()
	for _, k := range keys {
		if !fed[k] {
			t.Errorf("%s: not told fed after the forge answered for it (%v)", k, fed)
		}
	}
	if fed[unaskable] {
		t.Errorf("%s told fed; the feed cannot ask about it", unaskable)
	}
	st := x.status()
	if len(st.GetHosts()) != 1 || st.GetHosts()[0].GetUnaskable() != 1 || st.GetHosts()[0].GetFed() != 12 || st.GetHosts()[0].GetState() != "working" {
		t.Fatalf("feed status %v; want github.com working, 12 fed, 1 unaskable", st.GetHosts())
	}
	if v, _ := metricstest.Value(t, x.reg, "gitfleet_forge_feed_repositories", "host", "github.com", "coverage", "unaskable"); v != 1 {
		t.Errorf("unaskable repositories metric %v, want 1", v)
	}
	x.gh.mu.Lock()
	if n := x.gh.asked["group/sub"]; n != 0 {
		t.Errorf("the forge was asked about a truncated path %d times", n)
	}
	x.gh.mu.Unlock()

	// The forge's limit is spent for six hours.
	x.gh.setLimiting(true)
	x.run(t, 5*time.Minute)
	if st := x.status(); len(st.GetLimited()) != 0 {
		t.Fatalf("limited after 5 minutes of a 10-minute fed max age: %v", st)
	}
	x.run(t, 10*time.Minute)
	st = x.status()
	if len(st.GetLimited()) != 1 || st.GetLimited()[0] != "github.com" || len(st.GetWorking()) != 0 || st.GetHosts()[0].GetState() != "feed-limited" {
		t.Fatalf("feed status after 15 minutes of 429: %v; want github.com limited, not working", st)
	}
	fed = x.fed()
	for _, k := range keys {
		if f, told := fed[k]; !told || f {
			t.Errorf("%s: told fed=%v (told: %v) after the feed's answers grew older than the fed max age; want unfed", k, f, told)
		}
	}
	if v, _ := metricstest.Value(t, x.reg, "gitfleet_forge_feed_limited", "host", "github.com"); v != 1 {
		t.Errorf("gitfleet_forge_feed_limited = %v, want 1", v)
	}
	if n := st.GetHosts()[0].GetFed(); n != 0 {
		t.Errorf("%d repositories counted fed while the feed is limited", n)
	}
}

// A feed of 12 quiet repositories on one token spends what they need: a
// request about a minute (--forge-min-ask-interval), not the budget's
// 4,000 an hour; the status shows the requests of the last hour and the
// token's budget left.
func TestAFeedOfAFewQuietRepositoriesLeavesTheBudgetUnspent(t *testing.T) {
	const minutes = 30
	x := newFeedFixture(t, FeedConfig{}, quietKeys(12))
	x.run(t, minutes*time.Minute)
	requests := x.gh.count()
	t.Logf("%d requests in %d minutes for 12 quiet repositories (budget: %d)", requests, minutes, DefaultFeedRequestsPerHour*minutes/60)
	if max := 2 * minutes; requests > max {
		t.Fatalf("%d requests in %d minutes for 12 quiet repositories; want about one a minute (at most %d)", requests, minutes, max)
	}
	x.gh.mu.Lock()
	for k, n := range x.gh.asked {
		if n > minutes+1 {
			t.Errorf("%s asked about %d times in %d minutes; want at most once a minute", k, n, minutes)
		}
	}
	x.gh.mu.Unlock()
	h := x.status().GetHosts()[0]
	if int(h.GetRequestsLastHour()) != requests || len(h.GetTokens()) != 1 || h.GetTokens()[0].GetRemaining() != int32(5000-requests) {
		t.Errorf("status %v; want %d requests in the last hour and %d left of the token's budget", h, requests, 5000-requests)
	}
}
