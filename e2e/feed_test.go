package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// githubAPI is a GitHub-like GraphQL server: it answers aliased
// `repository(owner:, name:) { pushedAt nameWithOwner ... }` lookups with
// the push times the test sets (and, when asked, the default branch and
// isArchived it sets; a renamed repository under its new nameWithOwner), beside `rateLimit`, with GitHub's rate-limit
// headers, and NOT_FOUND for repositories it does not know.
type githubAPI struct {
	mu       sync.Mutex
	pushed   map[string]time.Time // "owner/name" -> last push
	heads    map[string]string    // "owner/name" -> its default branch (defaultBranchRef), when set
	archived map[string]bool      // "owner/name" -> isArchived
	renamed  map[string]string    // "owner/name" -> the nameWithOwner it answers under, when renamed
	token    string
	requests atomic.Int64
	listings atomic.Int64 // requests of repositoryOwner listings
	// mode: "" answers; "garbage", "error" and "huge" misbehave; "spent"
	// answers 403 with the primary limit spent until resetAt.
	mode      string
	resetAt   time.Time
	spentAsks atomic.Int64 // requests made while the limit was spent
}

func (g *githubAPI) setMode(mode string, resetAt time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode, g.resetAt = mode, resetAt
}

var aliasRE = regexp.MustCompile(`(r\d+): repository\(owner: \$(o\d+), name: \$(n\d+)\)`)

func (g *githubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/api/graphql" {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "bearer "+g.token && r.Header.Get("Authorization") != "Bearer "+g.token {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"message":"Problems parsing JSON"}`, http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	mode, resetAt := g.mode, g.resetAt
	g.mu.Unlock()
	if mode == "spent" && time.Now().After(resetAt) {
		mode = ""
	}
	switch mode {
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data": {"rateLimit": "lots", "r0": [1,2,3]}}`))
		return
	case "error":
		http.Error(w, `{"message":"Server Error"}`, http.StatusBadGateway)
		return
	case "huge":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data": {"r0": "`))
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 20 { // 20 MiB, over the client's bound
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		return
	case "spent":
		g.spentAsks.Add(1)
		h := w.Header()
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", "5000")
		h.Set("X-RateLimit-Resource", "graphql")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(resetAt.Unix(), 10))
		http.Error(w, `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/rate-limit"}`, http.StatusForbidden)
		return
	}
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	data := map[string]any{"rateLimit": map[string]any{"cost": 1, "remaining": 4999, "limit": 5000, "resetAt": reset.UTC().Format(time.RFC3339)}}
	var errs []map[string]any
	g.mu.Lock()
	if strings.Contains(req.Query, "repositoryOwner(login: $login)") {
		g.listings.Add(1)
		data["rateLimit"].(map[string]any)["cost"] = 2 // a hundred nodes with a connection of topics each
		data["repositoryOwner"] = g.ownerPage(req.Query, req.Variables)
	}
	for _, m := range aliasRE.FindAllStringSubmatch(req.Query, -1) {
		owner, _ := req.Variables[m[2]].(string)
		name, _ := req.Variables[m[3]].(string)
		at, ok := g.pushed[strings.ToLower(owner+"/"+name)]
		if !ok {
			data[m[1]] = nil
			errs = append(errs, map[string]any{"type": "NOT_FOUND", "path": []string{m[1]},
				"message": fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, name)})
			continue
		}
		nameWithOwner := owner + "/" + name
		if to, ok := g.renamed[strings.ToLower(nameWithOwner)]; ok {
			nameWithOwner = to
		}
		repo := map[string]any{"pushedAt": at.UTC().Format(time.RFC3339), "nameWithOwner": nameWithOwner}
		if strings.Contains(req.Query, "defaultBranchRef { name }") {
			var head any
			if b := g.heads[strings.ToLower(owner+"/"+name)]; b != "" {
				head = map[string]any{"name": b}
			}
			repo["defaultBranchRef"] = head
		}
		if strings.Contains(req.Query, "isArchived") {
			repo["isArchived"] = g.archived[strings.ToLower(owner+"/"+name)]
		}
		data[m[1]] = repo
	}
	g.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4999")
	h.Set("X-RateLimit-Used", "1")
	h.Set("X-RateLimit-Resource", "graphql")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	body := map[string]any{"data": data}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	_ = json.NewEncoder(w).Encode(body)
}

// ownerPage answers repositoryOwner(login).repositories(first: 100,
// after:) from the repositories the forge knows, in name order, 100 a
// page, the cursor being the last name of the page. Caller holds g.mu.
func (g *githubAPI) ownerPage(query string, vars map[string]any) any {
	login, _ := vars["login"].(string)
	after, _ := vars["after"].(string)
	var names []string
	for path := range g.pushed {
		if strings.HasPrefix(path, strings.ToLower(login)+"/") && path > after {
			names = append(names, path)
		}
	}
	if len(names) == 0 && after == "" {
		return nil // GitHub answers null, with a NOT_FOUND error, for an unknown login
	}
	slices.Sort(names)
	more := len(names) > 100
	names = names[:min(len(names), 100)]
	nodes := make([]any, len(names))
	for i, n := range names {
		nodes[i] = map[string]any{"nameWithOwner": n, "databaseId": 1000 + i, "isFork": false, "isArchived": g.archived[n],
			"diskUsage": 12, "repositoryTopics": map[string]any{"nodes": []any{}}}
	}
	var end any
	if len(names) > 0 {
		end = names[len(names)-1]
	}
	return map[string]any{"repositories": map[string]any{"pageInfo": map[string]any{"hasNextPage": more, "endCursor": end}, "nodes": nodes}}
}

// drop makes the forge forget path (a deleted repository).
func (g *githubAPI) drop(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pushed, strings.ToLower(path))
}

// setHead makes the forge name branch as path's default branch, pushed
// at at (GitHub moves pushedAt on no such switch: at is the last push).
func (g *githubAPI) setHead(path, branch string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.heads == nil {
		g.heads = map[string]string{}
	}
	g.heads[strings.ToLower(path)] = branch
}

func (g *githubAPI) push(path string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pushed[strings.ToLower(path)] = at
}

// A push is served within a minute without a webhook, while the nodes'
// background checks are 12 hours apart: the forge's change feed, run by
// the coordinator, sees the new push time and asks the owner for a check.
func TestAForgeFeedBringsAPushWithoutAWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 3)
	gh := &githubAPI{pushed: map[string]time.Time{}, token: "test-token-1"}
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
		gh.push(f.name(i), time.Now().Add(-time.Hour))
	}
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	f.writeCatalog(repos, "3 repositories on a forge with a change feed")
	host := strings.TrimPrefix(f.up.URL, "http://")
	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--log-level", "debug",
		// Background checks 12 hours apart: only the feed can bring a push in time.
		"--max-interval", "12h", "--min-interval", "2s", "--budget", "1",
		"--forge", host+"=github,api="+api.URL+"/api", "--forge-token", host+"="+gh.token, "--forge-min-ask-interval", "1s")
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })

	id, err := f.up.Commit(f.name(1), "main")
	if err != nil {
		t.Fatal(err)
	}
	gh.push(f.name(1), time.Now())
	pushed := time.Now()
	eventually(t, 60*time.Second, "the push served", func() error {
		got, err := lsRemote(f.base + "/" + f.key(1) + ".git")
		if err != nil {
			return err
		}
		if got["refs/heads/main"] != id {
			return fmt.Errorf("main at %s, want %s", got["refs/heads/main"], id)
		}
		return nil
	})
	t.Logf("served %v after the push", time.Since(pushed).Round(100*time.Millisecond))
	if err := f.servedLikeUpstream(repos); err != nil {
		t.Fatal(err)
	}
	if gh.requests.Load() == 0 || up.count("forge feed: a push newer than the last check") == 0 {
		t.Fatalf("the push did not come through the feed (%d requests to the forge)", gh.requests.Load())
	}
	if n := up.count("test-token-1"); n != 0 {
		t.Fatalf("the forge token is in the log %d times", n)
	}
	want := map[string]string{"refs/heads/main": id}
	if got, _ := lsRemote(f.base + "/" + f.key(1) + ".git"); !maps.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
}

// A feed that answers garbage, errors or an oversized body changes
// nothing: its host falls back to polling (a push is still served, by the
// owner's own checks) and the feed is reported failing. A spent rate limit
// is waited out: no request until its reset, then the feed works again.
func TestAFailingOrLimitedFeedFallsBackToPollingAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 2)
	gh := &githubAPI{pushed: map[string]time.Time{}, token: "test-token-1"}
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
		gh.push(f.name(i), time.Now().Add(-time.Hour))
	}
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	f.writeCatalog(repos, "2 repositories on a forge whose feed misbehaves")
	host := strings.TrimPrefix(f.up.URL, "http://")
	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--log-level", "debug",
		"--max-interval", "4s", "--min-interval", "1s", "--forge-backoff", "300ms",
		"--forge", host+"=github,api="+api.URL+"/api", "--forge-token", host+"="+gh.token, "--forge-min-ask-interval", "1s")
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	eventually(t, 30*time.Second, "the node told the feed works", func() error {
		if up.count("forge feed works: background checks") == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	// Garbage here; errors and oversized answers are the forge package's
	// tests (each costs this test a minute of the client's backoff).
	for _, mode := range []string{"garbage"} {
		gh.setMode(mode, time.Time{})
		before := gh.requests.Load()
		// Failing, and reported so on /metrics.
		eventually(t, 90*time.Second, mode+": the feed is reported failing", func() error {
			fams, err := scrape(f.base + "/metrics")
			if err != nil {
				return err
			}
			if v, _ := sample(fams, "gitfleet_forge_feed_failing", "host", host); v != 1 || gh.requests.Load() < before+3 {
				return fmt.Errorf("gitfleet_forge_feed_failing = %v after %d requests", v, gh.requests.Load()-before)
			}
			return nil
		})
		// Polling still brings a push.
		id, err := f.up.Commit(f.name(0), "main")
		if err != nil {
			t.Fatal(err)
		}
		gh.push(f.name(0), time.Now())
		eventually(t, 60*time.Second, mode+": a push served by polling", func() error {
			got, err := lsRemote(f.base + "/" + f.key(0) + ".git")
			if err != nil {
				return err
			}
			if got["refs/heads/main"] != id {
				return fmt.Errorf("main at %s, want %s", got["refs/heads/main"], id)
			}
			return nil
		})
		// Recovers, and is reported working again.
		gh.setMode("", time.Time{})
		eventually(t, 120*time.Second, mode+": the feed answers again", func() error {
			fams, err := scrape(f.base + "/metrics")
			if err != nil {
				return err
			}
			if v, _ := sample(fams, "gitfleet_forge_feed_failing", "host", host); v != 0 {
				return fmt.Errorf("gitfleet_forge_feed_failing = %v", v)
			}
			return nil
		})
	}
	if n := up.count("forge feed failing"); n != 1 {
		t.Fatalf("the feed was reported failing %d times, want once", n)
	}
	// The node was told: rarer checks while the feed worked, polling while
	// it failed.
	if up.count("forge feed works: background checks") < 2 || up.count("forge feed stopped") != 1 {
		t.Fatalf("the node was not told of the feed's state: %d works, %d stopped",
			up.count("forge feed works: background checks"), up.count("forge feed stopped"))
	}

	// A spent limit: at most the request that met it until the reset,
	// then the feed works again.
	reset := time.Now().Add(6 * time.Second).Truncate(time.Second) // GitHub's resets are whole seconds
	gh.setMode("spent", reset)
	eventually(t, 30*time.Second, "the limit met", func() error {
		if gh.spentAsks.Load() == 0 {
			return fmt.Errorf("no request met the spent limit yet")
		}
		return nil
	})
	eventually(t, 60*time.Second, "asked again after the reset", func() error {
		if time.Now().Before(reset) {
			return fmt.Errorf("before the reset")
		}
		fams, err := scrape(f.base + "/metrics")
		if err != nil {
			return err
		}
		if v, _ := sample(fams, "gitfleet_forge_feed_requests_total", "host", host, "result", "ok"); v == 0 {
			return fmt.Errorf("no answer yet")
		}
		return nil
	})
	if n := gh.spentAsks.Load(); n > 1 {
		t.Fatalf("%d requests while the limit was spent, want the one that met it", n)
	}
	if n := up.count("test-token-1"); n != 0 {
		t.Fatalf("the forge token is in the log %d times", n)
	}
}
