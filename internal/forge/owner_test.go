package forge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// ownerGH speaks GitHub's GraphQL for repositoryOwner(login).repositories,
// 100 nodes a page by cursor, with rateLimit and GitHub's headers; mode
// makes it misbehave.
type ownerGH struct {
	repos    []string // nameWithOwner, in order
	mode     string   // "", "loop", "huge", "foreign", "errors"
	requests atomic.Int64
}

func (s *ownerGH) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.Contains(req.Query, "repositoryOwner(login: $login)") {
		http.Error(w, `{"message":"bad query"}`, http.StatusBadRequest)
		return
	}
	start := 0
	if after, ok := req.Variables["after"].(string); ok {
		start, _ = strconv.Atoi(after)
	}
	end := min(start+100, len(s.repos))
	var nodes []any
	for i, name := range s.repos[start:end] {
		if s.mode == "foreign" && i == 0 {
			name = "someone-else/" + strings.SplitN(name, "/", 2)[1]
		}
		nodes = append(nodes, map[string]any{"nameWithOwner": name, "databaseId": start + i + 1, "isFork": i%2 == 1,
			"isArchived": false, "diskUsage": 3, "repositoryTopics": map[string]any{"nodes": []any{map[string]any{"topic": map[string]any{"name": "go"}}}}})
	}
	cursor := strconv.Itoa(end)
	if s.mode == "loop" {
		cursor = "0"
	}
	w.Header().Set("X-RateLimit-Remaining", "4990")
	w.Header().Set("X-RateLimit-Limit", "5000")
	if s.mode == "huge" {
		_, _ = w.Write([]byte(`{"data": {"x": "` + strings.Repeat("x", 2<<20) + `"}}`))
		return
	}
	if s.mode == "errors" {
		_, _ = w.Write([]byte(`{"data": {"repositoryOwner": null}, "errors": [{"type": "NOT_FOUND", "path": ["repositoryOwner"], "message": "Could not resolve to a RepositoryOwner"}]}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{
		"rateLimit": map[string]any{"cost": 1, "remaining": 4990, "limit": 5000, "resetAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		"repositoryOwner": map[string]any{"repositories": map[string]any{
			"pageInfo": map[string]any{"hasNextPage": end < len(s.repos), "endCursor": cursor}, "nodes": nodes}}}})
}

func names(owner string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/repo-%04d", owner, i)
	}
	return out
}

func newOwnerClient(t *testing.T, kind Kind, h http.Handler, opt Options) OwnerLister {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	api, _ := url.Parse(srv.URL + "/api")
	opt.Clock = clock.NewFake(t0)
	opt.Pace = -1
	if opt.MaxBody == 0 {
		opt.MaxBody = 1 << 20
	}
	cl, err := New(Forge{Host: "forge.example", Kind: kind, API: api}, []Token{NewToken("tok")}, opt)
	if err != nil {
		t.Fatal(err)
	}
	ol, ok := cl.(OwnerLister)
	if !ok {
		t.Fatalf("the %s client lists no owners", kind)
	}
	return ol
}

func TestGitHubListsAnOwnerAHundredAQuery(t *testing.T) {
	gh := &ownerGH{repos: names("Acme", 250)}
	l, err := newOwnerClient(t, GitHub, gh, Options{}).ListOwner(context.Background(), OwnerQuery{Owner: "acme", Subgroups: false})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Repos) != 250 || l.Requests != 3 || gh.requests.Load() != 3 || l.Refused != 0 {
		t.Fatalf("%d repositories in %d requests (%d served), %d refused; want 250 in 3", len(l.Repos), l.Requests, gh.requests.Load(), l.Refused)
	}
	r := l.Repos[1]
	if r.Path != "Acme/repo-0001" || r.ID != 2 || !r.Fork || r.Size != 3<<10 || len(r.Topics) != 1 || r.Topics[0] != "go" {
		t.Fatalf("second repository %+v", r)
	}
}

func TestGitHubOwnerListingsRefuseHostileAnswers(t *testing.T) {
	for _, tt := range []struct {
		mode, want string
	}{
		{"loop", "came back: a loop"},
		{"huge", "over the bound"},
		{"errors", "not found"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			gh := &ownerGH{repos: names("acme", 250), mode: tt.mode}
			l, err := newOwnerClient(t, GitHub, gh, Options{}).ListOwner(context.Background(), OwnerQuery{Owner: "acme", Subgroups: false})
			if err == nil || !strings.Contains(err.Error(), tt.want) || len(l.Repos) != 0 {
				t.Fatalf("listing %d repositories, err %v; want none and %q", len(l.Repos), err, tt.want)
			}
			if n := gh.requests.Load(); n > 3 {
				t.Fatalf("%d requests", n)
			}
		})
	}
	t.Run("a name of another owner", func(t *testing.T) {
		gh := &ownerGH{repos: names("acme", 150), mode: "foreign"}
		l, err := newOwnerClient(t, GitHub, gh, Options{}).ListOwner(context.Background(), OwnerQuery{Owner: "acme", Subgroups: false})
		if err != nil || len(l.Repos) != 148 || l.Refused != 2 {
			t.Fatalf("%d listed, %d refused, err %v; want 148 and 2", len(l.Repos), l.Refused, err)
		}
	})
	t.Run("the bound of pages", func(t *testing.T) {
		gh := &ownerGH{repos: names("acme", 250)}
		_, err := newOwnerClient(t, GitHub, gh, Options{MaxOwnerPages: 2}).ListOwner(context.Background(), OwnerQuery{Owner: "acme", Subgroups: false})
		if err == nil || !strings.Contains(err.Error(), "bound of pages") || gh.requests.Load() != 2 {
			t.Fatalf("err %v after %d requests", err, gh.requests.Load())
		}
	})
	t.Run("an owner that is no GitHub owner", func(t *testing.T) {
		gh := &ownerGH{}
		if _, err := newOwnerClient(t, GitHub, gh, Options{}).ListOwner(context.Background(), OwnerQuery{Owner: "a/b", Subgroups: false}); err == nil || gh.requests.Load() != 0 {
			t.Fatalf("err %v after %d requests", err, gh.requests.Load())
		}
	})
}

// ownerREST serves GitLab's /groups/:id/projects, Gitea's and Gitee's
// /orgs/:org/repos, numbered pages of the size asked; mode "loop" names
// the same next page forever (GitLab's X-Next-Page), "foreign" names a
// project of another group, "huge" sends an oversized page.
type ownerREST struct {
	kind     Kind
	repos    []string
	mode     string
	requests atomic.Int64
	paths    []string
}

func (s *ownerREST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.paths = append(s.paths, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
	q := r.URL.Query()
	n, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get(map[Kind]string{GitLab: "per_page", Gitea: "limit", Gitee: "per_page"}[s.kind]))
	if n < 1 || size < 1 {
		http.Error(w, `{"message":"bad page"}`, http.StatusBadRequest)
		return
	}
	if s.mode == "huge" {
		_, _ = w.Write([]byte(`[{"full_name": "` + strings.Repeat("x", 2<<20) + `"}]`))
		return
	}
	start, end := min((n-1)*size, len(s.repos)), min(n*size, len(s.repos))
	var items []map[string]any
	for i, name := range s.repos[start:end] {
		if s.mode == "foreign" && i == 0 {
			name = "other/" + name
		}
		it := map[string]any{"id": start + i + 1, "archived": i%3 == 0, "topics": []string{"t"}}
		switch s.kind {
		case GitLab:
			it["path_with_namespace"] = name
			if i%2 == 1 {
				it["forked_from_project"] = map[string]any{"id": 1}
			}
			it["statistics"] = map[string]any{"repository_size": 1000}
		default:
			it["full_name"], it["fork"], it["size"] = name, i%2 == 1, 2
		}
		items = append(items, it)
	}
	if s.kind == GitLab && end < len(s.repos) {
		w.Header().Set("X-Next-Page", strconv.Itoa(n+1))
	} else if s.kind == GitLab {
		w.Header().Set("X-Next-Page", "")
	}
	if s.mode == "loop" && s.kind == GitLab {
		w.Header().Set("X-Next-Page", strconv.Itoa(n+1))
		items = items[:0:0]
		items = append(items, map[string]any{"path_with_namespace": s.repos[0]})
	}
	writeJSON(w, items)
}

func TestRESTForgesListAnOwnerPageByPage(t *testing.T) {
	for _, tt := range []struct {
		kind      Kind
		owner     string
		subgroups bool
		repos     []string
		requests  int
		wantPath  string
		size      int64
	}{
		{GitLab, "grp/sub", true, append(names("grp/sub", 150), "grp/sub/deeper/p"), 2, "/api/groups/grp%2Fsub/projects", 1000},
		{Gitea, "org", false, names("org", 120), 3, "/api/orgs/org/repos", 2 << 10},
		{Gitee, "org", false, names("org", 120), 2, "/api/orgs/org/repos", 0},
	} {
		t.Run(string(tt.kind), func(t *testing.T) {
			s := &ownerREST{kind: tt.kind, repos: tt.repos}
			l, err := newOwnerClient(t, tt.kind, s, Options{}).ListOwner(context.Background(), OwnerQuery{Owner: tt.owner, Subgroups: tt.subgroups})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Repos) != len(tt.repos) || l.Requests != tt.requests || l.Refused != 0 {
				t.Fatalf("%d of %d in %d requests (want %d), %d refused; asked %v", len(l.Repos), len(tt.repos), l.Requests, tt.requests, l.Refused, s.paths)
			}
			if !strings.HasPrefix(s.paths[0], tt.wantPath+"?") {
				t.Fatalf("asked %s, want %s", s.paths[0], tt.wantPath)
			}
			r := l.Repos[1]
			if r.ID != 2 || !r.Fork || r.Archived || r.Size != tt.size || len(r.Topics) != 1 || !l.Repos[0].Archived {
				t.Fatalf("second repository %+v", r)
			}
		})
	}
}

func TestRESTOwnerListingsRefuseHostileAnswers(t *testing.T) {
	t.Run("a next page forever stops at the bound", func(t *testing.T) {
		s := &ownerREST{kind: GitLab, repos: names("grp", 10), mode: "loop"}
		_, err := newOwnerClient(t, GitLab, s, Options{MaxOwnerPages: 5}).ListOwner(context.Background(), OwnerQuery{Owner: "grp", Subgroups: false})
		if err == nil || !strings.Contains(err.Error(), "bound of pages") || s.requests.Load() != 5 {
			t.Fatalf("err %v after %d requests", err, s.requests.Load())
		}
	})
	t.Run("a huge page", func(t *testing.T) {
		s := &ownerREST{kind: Gitea, repos: names("org", 10), mode: "huge"}
		if _, err := newOwnerClient(t, Gitea, s, Options{}).ListOwner(context.Background(), OwnerQuery{Owner: "org", Subgroups: false}); err == nil || !strings.Contains(err.Error(), "over the bound") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a name of another owner, or in a subgroup not asked for", func(t *testing.T) {
		s := &ownerREST{kind: GitLab, repos: append(names("grp", 5), "grp/sub/p"), mode: "foreign"}
		l, err := newOwnerClient(t, GitLab, s, Options{}).ListOwner(context.Background(), OwnerQuery{Owner: "grp", Subgroups: false})
		if err != nil || len(l.Repos) != 4 || l.Refused != 2 {
			t.Fatalf("%d listed, %d refused, err %v; want 4 and 2", len(l.Repos), l.Refused, err)
		}
	})
	t.Run("subgroups on a forge without them", func(t *testing.T) {
		s := &ownerREST{kind: Gitea}
		if _, err := newOwnerClient(t, Gitea, s, Options{}).ListOwner(context.Background(), OwnerQuery{Owner: "org", Subgroups: true}); err == nil || s.requests.Load() != 0 {
			t.Fatalf("err %v", err)
		}
	})
}

// BenchmarkListOwner lists an owner of 10,000 repositories from a
// GitHub-like GraphQL server on 127.0.0.1 (100 a page) and from a
// GitLab-like REST one (100 a page): requests, requests per 100
// repositories, and seconds a listing.
func BenchmarkListOwner(b *testing.B) {
	const n = 10_000
	for _, kind := range []Kind{GitHub, GitLab} {
		b.Run(string(kind), func(b *testing.B) {
			var h http.Handler = &ownerGH{repos: names("acme", n)}
			if kind == GitLab {
				h = &ownerREST{kind: GitLab, repos: names("acme", n)}
			}
			srv := httptest.NewServer(h)
			b.Cleanup(srv.Close)
			api, _ := url.Parse(srv.URL + "/api")
			cl, err := New(Forge{Host: "forge.example", Kind: kind, API: api}, []Token{NewToken("tok")}, Options{Pace: -1})
			if err != nil {
				b.Fatal(err)
			}
			ol := cl.(OwnerLister)
			var requests int
			began := time.Now()
			for b.Loop() {
				l, err := ol.ListOwner(context.Background(), OwnerQuery{Owner: "acme"})
				if err != nil || len(l.Repos) != n {
					b.Fatalf("%d listed, err %v", len(l.Repos), err)
				}
				requests = l.Requests
			}
			b.ReportMetric(float64(requests), "requests")
			b.ReportMetric(float64(requests)*100/n, "requests/100repos")
			b.ReportMetric(time.Since(began).Seconds()/float64(b.N), "s/listing")
		})
	}
}
