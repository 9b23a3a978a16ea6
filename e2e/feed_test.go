package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// githubAPI is a GitHub-like GraphQL server: it answers aliased
// `repository(owner:, name:) { pushedAt nameWithOwner }` lookups with the
// push times the test sets, beside `rateLimit`, with GitHub's rate-limit
// headers, and NOT_FOUND for repositories it does not know.
type githubAPI struct {
	mu       sync.Mutex
	pushed   map[string]time.Time // "owner/name" -> last push
	token    string
	requests atomic.Int64
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
		Query     string            `json:"query"`
		Variables map[string]string `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"message":"Problems parsing JSON"}`, http.StatusBadRequest)
		return
	}
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	data := map[string]any{"rateLimit": map[string]any{"cost": 1, "remaining": 4999, "limit": 5000, "resetAt": reset.UTC().Format(time.RFC3339)}}
	var errs []map[string]any
	g.mu.Lock()
	for _, m := range aliasRE.FindAllStringSubmatch(req.Query, -1) {
		owner, name := req.Variables[m[2]], req.Variables[m[3]]
		at, ok := g.pushed[strings.ToLower(owner+"/"+name)]
		if !ok {
			data[m[1]] = nil
			errs = append(errs, map[string]any{"type": "NOT_FOUND", "path": []string{m[1]},
				"message": fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, name)})
			continue
		}
		data[m[1]] = map[string]any{"pushedAt": at.UTC().Format(time.RFC3339), "nameWithOwner": owner + "/" + name}
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
		"--forge", host+"=github,api="+api.URL+"/api", "--forge-token", host+"="+gh.token)
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
