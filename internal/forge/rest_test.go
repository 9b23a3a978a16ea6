package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// restServer holds the repositories of a REST forge (GitLab, Gitea or
// Gitee) and what it was asked.
type restServer struct {
	clk   *clock.Fake
	mu    sync.Mutex
	repos []restRepoState // newest activity first
	asked []string        // request URIs, escaped as sent
	auth  []string        // credentials, as sent
	times []time.Time     // the fake time of each request
	mode  string          // "", "garbage", "spent"
	seen  chan struct{}   // a signal for each request
}

type restRepoState struct {
	name string // as the forge spells it now
	old  string // a former name that still answers, if any
	at   time.Time
	// parent is a fork's parent's name (on the lookups only); any
	// string, as a hostile forge may send.
	parent string
}

func newRESTServer(clk *clock.Fake, repos ...restRepoState) *restServer {
	sort.SliceStable(repos, func(i, j int) bool { return repos[i].at.After(repos[j].at) })
	return &restServer{clk: clk, repos: repos, seen: make(chan struct{}, 100)}
}

func (s *restServer) find(path string) (restRepoState, bool) {
	for _, r := range s.repos {
		if strings.EqualFold(r.name, path) || strings.EqualFold(r.old, path) {
			return r, true
		}
	}
	return restRepoState{}, false
}

// record notes a request; it says false (and answers) when the server
// is told to misbehave.
func (s *restServer) record(w http.ResponseWriter, r *http.Request, cred string) bool {
	s.asked = append(s.asked, r.URL.RequestURI())
	s.auth = append(s.auth, cred)
	s.times = append(s.times, s.clk.Now())
	s.seen <- struct{}{}
	w.Header().Set("Content-Type", "application/json")
	switch s.mode {
	case "garbage":
		io.WriteString(w, `{"ok":false,"data":"nope"`)
		return false
	case "spent":
		reset := s.clk.Now().Add(17 * time.Minute)
		w.Header().Set("RateLimit-Limit", "2000")
		w.Header().Set("RateLimit-Remaining", "0")
		w.Header().Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		w.Header().Set("Retry-After", strconv.Itoa(int(17*time.Minute/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "Retry later\n")
		return false
	}
	return true
}

func (s *restServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

func repoJSON(nameField, timeField string, r restRepoState) map[string]any {
	var at any
	if !r.at.IsZero() {
		at = r.at.UTC().Format(time.RFC3339)
	}
	return map[string]any{"id": 1, nameField: r.name, timeField: at, "description": "a repository"}
}

// withParent adds a fork's parent object, as the forge's lookup of one
// repository has it (GitLab: forked_from_project; Gitea, Gitee: parent).
func withParent(m map[string]any, parentField, nameField string, r restRepoState) map[string]any {
	if r.parent != "" {
		m[parentField] = map[string]any{"id": 2, nameField: r.parent}
	}
	return m
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
}

// gitlab serves GET /projects (the activity listing, X-Next-Page
// pagination) and GET /projects/:id (the full path, URL-encoded).
func (s *restServer) gitlab() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.record(w, r, r.Header.Get("Authorization")) {
			return
		}
		if id, ok := strings.CutPrefix(r.URL.EscapedPath(), "/projects/"); ok {
			if strings.Contains(id, "/") {
				http.Error(w, `{"error":"404 Not Found"}`, http.StatusNotFound) // a path not escaped
				return
			}
			repo, ok := s.find(strings.ReplaceAll(id, "%2F", "/"))
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, `{"message":"404 Project Not Found"}`)
				return
			}
			writeJSON(w, withParent(repoJSON("path_with_namespace", "last_activity_at", repo), "forked_from_project", "path_with_namespace", repo))
			return
		}
		q := r.URL.Query()
		after, err := time.Parse(time.RFC3339, q.Get("last_activity_after"))
		if r.URL.Path != "/projects" || err != nil || q.Get("order_by") != "last_activity_at" || q.Get("sort") != "desc" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"bad listing"}`)
			return
		}
		per, _ := strconv.Atoi(q.Get("per_page"))
		page, _ := strconv.Atoi(q.Get("page"))
		var active []map[string]any
		for _, repo := range s.repos {
			if repo.at.After(after) {
				active = append(active, repoJSON("path_with_namespace", "last_activity_at", repo))
			}
		}
		from, to := min((page-1)*per, len(active)), min(page*per, len(active))
		next := ""
		if to < len(active) {
			next = strconv.Itoa(page + 1)
		}
		w.Header().Set("X-Page", strconv.Itoa(page))
		w.Header().Set("X-Per-Page", strconv.Itoa(per))
		w.Header().Set("X-Next-Page", next)
		w.Header().Set("X-Total", strconv.Itoa(len(active)))
		w.Header().Set("RateLimit-Remaining", "1999")
		w.Header().Set("Link", `<https://elsewhere.example/projects?page=99>; rel="next"`)
		writeJSON(w, active[from:to])
	})
}

// gitea serves GET /repos/search?sort=updated and GET /repos/:owner/:repo.
func (s *restServer) gitea() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.record(w, r, r.Header.Get("Authorization")) {
			return
		}
		if r.URL.Path != "/repos/search" {
			repo, ok := s.find(strings.TrimPrefix(r.URL.Path, "/repos/"))
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, `{"errors":null,"message":"GetRepositoryByName","url":"https://codeberg.org/api/swagger"}`)
				return
			}
			writeJSON(w, repoJSON("full_name", "updated_at", repo))
			return
		}
		q := r.URL.Query()
		if q.Get("sort") != "updated" || q.Get("order") != "desc" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		limit, _ := strconv.Atoi(q.Get("limit"))
		page, _ := strconv.Atoi(q.Get("page"))
		from, to := min((page-1)*limit, len(s.repos)), min(page*limit, len(s.repos))
		data := []map[string]any{}
		for _, repo := range s.repos[from:to] {
			data = append(data, repoJSON("full_name", "updated_at", repo))
		}
		w.Header().Set("X-Total-Count", strconv.Itoa(len(s.repos)))
		writeJSON(w, map[string]any{"ok": true, "data": data})
	})
}

// gitee serves GET /repos/:owner/:repo?access_token=.
func (s *restServer) gitee() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.record(w, r, r.URL.Query().Get("access_token")) {
			return
		}
		repo, ok := s.find(strings.TrimPrefix(r.URL.Path, "/repos/"))
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"Not Found Project"}`)
			return
		}
		writeJSON(w, withParent(repoJSON("full_name", "pushed_at", repo), "parent", "full_name", repo))
	})
}

func generated(n int, newest time.Time, step time.Duration) []restRepoState {
	var out []restRepoState
	for i := range n {
		out = append(out, restRepoState{name: fmt.Sprintf("group%d/sub/project-%d", i%3, i), at: newest.Add(-time.Duration(i) * step)})
	}
	return out
}

func TestGitLabListsProjectsActiveSincePageByPage(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newRESTServer(clk, generated(300, t0, time.Minute)...)
	srv := httptest.NewServer(s.gitlab())
	defer srv.Close()
	l := testClient(t, GitLab, srv, clk, nil, "test-token-gl").(Lister)
	a, err := l.ChangedSince(context.Background(), t0.Add(-230*time.Minute+time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Pushed) != 230 || a.Truncated {
		t.Errorf("%d projects, truncated %v; want 230, not truncated", len(a.Pushed), a.Truncated)
	}
	reqs := s.requests()
	if len(reqs) != 3 || !strings.Contains(reqs[2], "page=3") || !strings.Contains(reqs[0], "last_activity_after=2026-11-27T05%3A10%3A01Z") {
		t.Errorf("requests %q: want 3 pages of the listing since 05:10:01 (the Link to another host is not followed)", reqs)
	}
	if s.auth[0] != "Bearer test-token-gl" {
		t.Errorf("credentials sent: %q", s.auth[0])
	}
	times, _ := PushTimes(repokey.Folding{}, "gitlab.com", a)
	if got := times["gitlab.com/group1/sub/project-1"]; !got.Equal(t0.Add(-time.Minute)) {
		t.Errorf("project-1 active at %v, want %v", got, t0.Add(-time.Minute))
	}
}

func TestGitLabListingStopsAtItsBoundOfPages(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newRESTServer(clk, generated(300, t0, time.Minute)...)
	srv := httptest.NewServer(s.gitlab())
	defer srv.Close()
	l := testClientOpt(t, GitLab, srv, Options{Clock: clk, MaxPages: 2}).(Lister)
	a, err := l.ChangedSince(context.Background(), t0.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Truncated || len(a.Pushed) != 200 || len(s.requests()) != 2 {
		t.Errorf("truncated %v, %d projects, %d requests; want true, 200, 2", a.Truncated, len(a.Pushed), len(s.requests()))
	}
}

func TestGitLabLooksUpProjectsByTheirEscapedFullPath(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newRESTServer(clk,
		restRepoState{name: "Group/Sub/Project", at: t0.Add(-time.Hour)},
		restRepoState{name: "new/place", old: "old/place", at: t0.Add(-2 * time.Hour)},
		restRepoState{name: "never/pushed"},
	)
	srv := httptest.NewServer(s.gitlab())
	defer srv.Close()
	l := testClient(t, GitLab, srv, clk, nil).(Lookup)
	a, err := l.PushedAt(context.Background(), []string{"group/sub/project", "old/place", "gone/away", "never/pushed", "bad/../path"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.Pushed) != fmt.Sprint([]Push{{"group/sub/project", t0.Add(-time.Hour)}}) {
		t.Errorf("pushed %v", a.Pushed)
	}
	if fmt.Sprint(a.Missing) != "[gone/away]" || len(a.Renamed) != 1 || a.Renamed[0].To != "new/place" {
		t.Errorf("missing %v, renamed %v; want gone/away, old/place -> new/place", a.Missing, a.Renamed)
	}
	if reqs := s.requests(); len(reqs) != 4 || reqs[0] != "/projects/group%2Fsub%2Fproject" {
		t.Errorf("requests %q: want 4, the first /projects/group%%2Fsub%%2Fproject", reqs)
	}
	if s.auth[0] != "" {
		t.Errorf("credentials %q sent without a token", s.auth[0])
	}
}

func TestGitLabSpentLimitWaitsForItsReset(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newRESTServer(clk, generated(3, t0, time.Minute)...)
	s.mode = "spent"
	srv := httptest.NewServer(s.gitlab())
	defer srv.Close()
	l := testClient(t, GitLab, srv, clk, nil, "test-token-gl").(Lister)
	_, err := l.ChangedSince(context.Background(), t0.Add(-time.Hour))
	var we *WaitError
	if !errors.As(err, &we) || !we.Limited || !we.Until.Equal(t0.Add(17*time.Minute)) {
		t.Fatalf("%v: want a WaitError until RateLimit-Reset, 17 minutes on", err)
	}
	s.mu.Lock()
	s.mode = ""
	s.mu.Unlock()
	clk.Advance(17 * time.Minute)
	if a, err := l.ChangedSince(context.Background(), t0.Add(-time.Hour)); err != nil || len(a.Pushed) != 3 {
		t.Fatalf("after the reset: %v, %v", a, err)
	}
}

func TestGiteaListingStopsAtTheFirstOlderRepository(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newRESTServer(clk, generated(500, t0, time.Minute)...)
	srv := httptest.NewServer(s.gitea())
	defer srv.Close()
	l := testClient(t, Gitea, srv, clk, nil, "test-token-gt").(Lister)
	a, err := l.ChangedSince(context.Background(), t0.Add(-59*time.Minute-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Pushed) != 60 || a.Truncated {
		t.Errorf("%d repositories, truncated %v; want 60, no", len(a.Pushed), a.Truncated)
	}
	if reqs := s.requests(); len(reqs) != 2 || !strings.Contains(reqs[1], "page=2") || !strings.Contains(reqs[1], "limit=50") {
		t.Errorf("requests %q: want pages 1 and 2 of 50 only", reqs)
	}
	if s.auth[0] != "token test-token-gt" {
		t.Errorf("credentials sent: %q", s.auth[0])
	}
}

func TestGiteaBadAnswersChangeNothing(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newRESTServer(clk, generated(10, t0, time.Minute)...)
	s.mode = "garbage"
	srv := httptest.NewServer(s.gitea())
	defer srv.Close()
	c := testClient(t, Gitea, srv, clk, nil)
	if a, err := c.(Lister).ChangedSince(context.Background(), t0.Add(-time.Hour)); err == nil || len(a.Pushed) != 0 {
		t.Errorf("garbage listing: %v, %v; want nothing and an error", a, err)
	}
	clk.Advance(time.Hour)
	s.mu.Lock()
	s.mode = ""
	s.repos[0].name = "no-slash" // not a repository's full name
	s.mu.Unlock()
	if a, err := c.(Lookup).PushedAt(context.Background(), []string{"group1/x"}); err != nil || len(a.Missing) != 1 {
		t.Errorf("a missing repository: %v, %v", a, err)
	}
	if a, err := c.(Lister).ChangedSince(context.Background(), t0.Add(-time.Hour)); err == nil || len(a.Pushed) != 0 {
		t.Errorf("a listing with a bad name: %v, %v; want nothing and an error", a, err)
	}
}

func TestGiteeLooksUpEachRepositoryWithTheTokenInTheQuery(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newRESTServer(clk,
		restRepoState{name: "owner/repo", at: t0.Add(-time.Hour)},
		restRepoState{name: "owner/renamed", old: "owner/before", at: t0},
	)
	srv := httptest.NewServer(s.gitee())
	defer srv.Close()
	l := testClient(t, Gitee, srv, clk, nil, "test-token-ge").(Lookup)
	if _, ok := l.(Lister); ok {
		t.Error("the Gitee client lists: Gitee v5 has no listing by push time")
	}
	a, err := l.PushedAt(context.Background(), []string{"owner/repo", "owner/before", "owner/gone", "three/seg/ments"})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Pushed) != 1 || len(a.Renamed) != 1 || fmt.Sprint(a.Missing) != "[owner/gone]" {
		t.Errorf("answer %+v: want 1 pushed, 1 renamed, owner/gone missing", a)
	}
	if len(s.auth) != 3 || s.auth[0] != "test-token-ge" {
		t.Errorf("access_token sent: %q (want the token, 3 requests)", s.auth)
	}
	if _, err := l.PushedAt(context.Background(), make([]string, l.BatchSize()+1)); err == nil {
		t.Error("a batch over BatchSize was accepted")
	}
}

func TestGiteeRequestsArePaced(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newRESTServer(clk, generated(3, t0, time.Minute)...)
	srv := httptest.NewServer(s.gitee())
	defer srv.Close()
	l := testClientOpt(t, Gitee, srv, Options{Clock: clk, Pace: 750 * time.Millisecond}).(Lookup)
	done := make(chan error, 1)
	go func() {
		_, err := l.PushedAt(context.Background(), []string{"a/b", "c/d", "e/f"})
		done <- err
	}()
	for range 3 {
		<-s.seen
		clk.Advance(750 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]time.Time{t0, t0.Add(750 * time.Millisecond), t0.Add(1500 * time.Millisecond)})
	if got := fmt.Sprint(s.times); got != want {
		t.Errorf("requests at %s, want %s", got, want)
	}
}

func TestRESTLookupsReportAForksParentAndParentsChecksIt(t *testing.T) {
	for _, tc := range []struct {
		kind    Kind
		host    string
		handler func(*restServer) http.Handler
		fork    string
	}{
		{GitLab, "gitlab.com", (*restServer).gitlab, "group/sub/fork"},
		{Gitee, "gitee.com", (*restServer).gitee, "someone/fork"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			clk := clock.NewFake(t0)
			s := newRESTServer(clk,
				restRepoState{name: tc.fork, at: t0, parent: "upstream/repo"},
				restRepoState{name: "upstream/repo", at: t0},
				restRepoState{name: "someone/self", at: t0, parent: "someone/self"},
				restRepoState{name: "someone/bad", at: t0, parent: "../x"},
			)
			srv := httptest.NewServer(tc.handler(s))
			defer srv.Close()
			l := testClient(t, tc.kind, srv, clk, nil, "test-token").(Lookup)
			a, err := l.PushedAt(context.Background(), []string{tc.fork, "upstream/repo", "someone/self", "someone/bad"})
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Pushed) != 4 {
				t.Errorf("pushed %v, want all 4 (a parent changes nothing of the push times)", a.Pushed)
			}
			parents, refused := Parents(repokey.Folding{}, tc.host, a)
			want := map[string]string{tc.host + "/" + tc.fork: tc.host + "/upstream/repo"}
			if fmt.Sprint(parents) != fmt.Sprint(want) || refused != 2 {
				t.Errorf("parents %v (refused %d), want %v (2 refused: a repository its own parent, a malformed name)", parents, refused, want)
			}
			if len(s.asked) != 4 {
				t.Errorf("%d requests, want 4: the parent comes with the lookup", len(s.asked))
			}
		})
	}
}
