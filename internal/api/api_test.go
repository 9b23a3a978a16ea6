package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

func reposEnv(t *testing.T) *testEnv {
	b := newFakeBackend()
	for i, k := range []string{"github.com/a/one", "github.com/a/two", "github.com/b/three", "gitlab.com/c/four", "gitee.com/d/five"} {
		b.repos[k] = RepoDetail{Repo: Repo{Key: k, Owner: uint32(1 + i%2), State: []repostate.State{repostate.OK, repostate.Failing}[i%3/2],
			Network: []string{"linux", "linux", "linux", detectedNetwork, ""}[i]}}
	}
	return newTestEnv(t, Config{PublicURL: "https://mirror.example/"}, b)
}

// detectedNetwork is a network's name as detection gives it.
const detectedNetwork = "root:0123456789abcdef0123456789abcdef01234567"

func TestListReposFiltersAndPages(t *testing.T) {
	e := reposEnv(t)
	tests := []struct {
		query     string
		wantKeys  []string
		wantTotal int
		wantLimit int
	}{
		{"", []string{"gitee.com/d/five", "github.com/a/one", "github.com/a/two", "github.com/b/three", "gitlab.com/c/four"}, 5, 100},
		{"?prefix=github.com/a/", []string{"github.com/a/one", "github.com/a/two"}, 2, 100},
		{"?owner=2", []string{"github.com/a/two", "gitlab.com/c/four"}, 2, 100},
		{"?state=failing", []string{"github.com/b/three"}, 1, 100},
		{"?limit=2", []string{"gitee.com/d/five", "github.com/a/one"}, 5, 2},
		{"?limit=2&offset=4", []string{"gitlab.com/c/four"}, 5, 2},
		{"?offset=10", []string{}, 5, 100},
		{"?limit=1000", []string{"gitee.com/d/five", "github.com/a/one", "github.com/a/two", "github.com/b/three", "gitlab.com/c/four"}, 5, 1000},
		{"?network=linux", []string{"github.com/a/one", "github.com/a/two", "github.com/b/three"}, 3, 100},
		{"?network=linux&state=ok", []string{"github.com/a/one", "github.com/a/two"}, 2, 100},
		{"?network=linux&state=failing&prefix=github.com/b/", []string{"github.com/b/three"}, 1, 100},
		{"?network=linux&prefix=github.com/a/&limit=1&offset=1", []string{"github.com/a/two"}, 2, 1},
		{"?network=linux&owner=2", []string{"github.com/a/two"}, 1, 100},
		{"?network=" + detectedNetwork, []string{"gitlab.com/c/four"}, 1, 100},
		{"?network=fork:github.com/a/one", []string{}, 0, 100},
		{"?network=no-members&state=ok", []string{}, 0, 100},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := e.do(t, "GET", "/api/v1/repos"+tt.query, nil)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var got listResponse
			r.decode(t, &got)
			keys := []string{}
			for _, repo := range got.Repos {
				keys = append(keys, repo.Key)
				if q, _ := url.ParseQuery(strings.TrimPrefix(tt.query, "?")); q.Has("network") && repo.Network != q.Get("network") {
					t.Errorf("%s listed in network %q", repo.Key, repo.Network)
				}
				if want := "https://mirror.example/" + repo.Key + ".git"; repo.CloneURL != want {
					t.Errorf("clone URL %q, want %q", repo.CloneURL, want)
				}
			}
			if !slices.Equal(keys, tt.wantKeys) || got.Total != tt.wantTotal || got.Limit != tt.wantLimit {
				t.Errorf("got %v total %d limit %d, want %v total %d limit %d", keys, got.Total, got.Limit, tt.wantKeys, tt.wantTotal, tt.wantLimit)
			}
			if !strings.Contains(string(r.body), `"repos": [`) {
				t.Errorf("repos must be a JSON array, even empty: %s", r.body)
			}
		})
	}
}

// The OpenAPI description of a repository lists every state it may be in,
// as package repostate has them (the filter's list has its own test).
func TestOpenAPIsRepositoryListsEveryState(t *testing.T) {
	var spec struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &spec); err != nil {
		t.Fatal(err)
	}
	if got := spec.Components.Schemas["Repo"].Properties["state"].Enum; !slices.Equal(got, repostate.Names()) {
		t.Errorf("Repo.state lists %v, want %v", got, repostate.Names())
	}
	var classes []string
	for _, c := range repostate.Classes() {
		classes = append(classes, c.String())
	}
	if got := spec.Components.Schemas["Repo"].Properties["error_class"].Enum; !slices.Equal(got, classes) {
		t.Errorf("Repo.error_class lists %v, want %v", got, classes)
	}
}

func TestListReposRefusesBadParameters(t *testing.T) {
	e := reposEnv(t)
	for _, q := range []string{"owner=x", "owner=-1", "owner=99999999999", "offset=-1", "offset=x", "limit=0", "limit=abc", "limit=1001", "limit=100000",
		"network=a%20b", "network=a/b", "network=-linux", "network=root:abc", "network=root:" + detectedNetwork[5:] + ".x",
		"network=fork:../etc", "network=fork:https://github.com/a/b", "network=" + strings.Repeat("n", 65)} {
		t.Run(q, func(t *testing.T) {
			wantError(t, e.do(t, "GET", "/api/v1/repos?"+q, nil), http.StatusBadRequest, strings.Split(q, "=")[0])
		})
	}
}

// An unknown state is 400 with the states there are, not an empty list;
// each state there is is taken, and the OpenAPI description lists them.
func TestListReposRefusesAnUnknownStateAndNamesTheStates(t *testing.T) {
	e := reposEnv(t)
	r := e.do(t, "GET", "/api/v1/repos?state=bogus", nil)
	wantError(t, r, http.StatusBadRequest, `state "bogus": want one of `+strings.Join(repostate.Names(), ", "))
	for _, st := range repostate.Names() {
		if r := e.do(t, "GET", "/api/v1/repos?state="+st, nil); r.status != http.StatusOK {
			t.Errorf("state=%s: %d %s", st, r.status, r.body)
		}
	}
	var spec struct {
		Paths map[string]map[string]json.RawMessage
	}
	var list struct {
		Parameters []struct {
			Name   string
			Schema struct{ Enum []string }
		}
	}
	if err := json.Unmarshal(openAPI, &spec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(spec.Paths["/api/v1/repos"]["get"], &list); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Parameters, func(p struct {
		Name   string
		Schema struct{ Enum []string }
	}) bool {
		return p.Name == "state"
	})
	if i < 0 || !slices.Equal(list.Parameters[i].Schema.Enum, repostate.Names()) {
		t.Errorf("the OpenAPI description's states (parameter %d): %+v, want %q", i, list.Parameters, repostate.Names())
	}
}

func TestGetRepoShowsDetail(t *testing.T) {
	b := newFakeBackend()
	last := epoch.Add(-time.Hour)
	b.repos["github.com/a/b"] = RepoDetail{
		Repo:    Repo{Key: "github.com/a/b", UpstreamURL: "https://github.com/a/b.git", Owner: 3, State: repostate.OK, LastCheck: &last, StalenessSeconds: 3600},
		Attrs:   map[string]string{"team": "kernel"},
		Refs:    map[string]string{"refs/heads/main": strings.Repeat("a", 40)},
		History: []HistoryEntry{{At: last, Kind: "check", Changed: true, DurationMs: 120}},
	}
	e := newTestEnv(t, Config{}, b)
	r := e.do(t, "GET", "/api/v1/repos/github.com/a/b", nil)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var got RepoDetail
	r.decode(t, &got)
	if got.Key != "github.com/a/b" || got.Owner != 3 || got.Attrs["team"] != "kernel" ||
		got.Refs["refs/heads/main"] == "" || len(got.History) != 1 || !got.History[0].Changed || got.LastCheck == nil {
		t.Errorf("detail not shown whole: %+v", got)
	}
	if want := e.ts.URL + "/github.com/a/b.git"; got.CloneURL != want {
		t.Errorf("clone URL %q, want %q (from the request's host)", got.CloneURL, want)
	}
}

func TestGetRepoRefusals(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend("github.com/a/b"))
	tests := []struct {
		path   string
		status int
		msg    string
	}{
		{"/api/v1/repos/github.com/a/missing", http.StatusNotFound, "not mirrored"},
		{"/api/v1/repos/github.com/a/-b", http.StatusBadRequest, "starts with '-'"},
		{"/api/v1/repos/git_hub!.com/a/b", http.StatusBadRequest, "bad host"},
		{"/api/v1/repos/github.com/a/%E2%80%AEb", http.StatusBadRequest, "non-ASCII"},
		{"/api/v1/repos/github.com", http.StatusBadRequest, "want host/path"},
		{"/api/v1/repos/", http.StatusBadRequest, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) { wantError(t, e.do(t, "GET", tt.path, nil), tt.status, tt.msg) })
	}
	// Another spelling of a key is the key.
	var got RepoDetail
	if r := e.do(t, "GET", "/api/v1/repos/GitHub.com/A/B", nil); r.status != http.StatusOK {
		t.Errorf("GET GitHub.com/A/B: %d %s", r.status, r.body)
	} else if r.decode(t, &got); got.Key != "github.com/a/b" {
		t.Errorf("GET GitHub.com/A/B gave %q", got.Key)
	}
}

func TestAddRepo(t *testing.T) {
	withSSH, err := egress.New(egress.Config{Schemes: []string{"https", "http", "ssh"}})
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, Config{Egress: &egress.Dialer{Policy: withSSH}}, newFakeBackend("github.com/old/repo"))
	tests := []struct {
		name, body string
		status     int
		key        string
	}{
		{"new repository", `{"url": "https://github.com/new/repo.git", "attrs": {"team": "x"}}`, http.StatusCreated, "github.com/new/repo"},
		{"known repository: attributes updated", `{"url": "git@github.com:old/repo.git", "attrs": {"team": "y"}}`, http.StatusOK, "github.com/old/repo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, "POST", "/api/v1/repos", []byte(tt.body), auth)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			var got Repo
			r.decode(t, &got)
			if got.Key != tt.key || !strings.HasSuffix(got.CloneURL, "/"+tt.key+".git") {
				t.Errorf("answer %+v, want key %s with a clone URL", got, tt.key)
			}
		})
	}
	calls := e.b.addedCalls()
	if len(calls) != 2 || calls[0].attrs["team"] != "x" || calls[1].url != "git@github.com:old/repo.git" {
		t.Errorf("backend got %+v", calls)
	}
}

func TestAddRepoRefusesBadURLsWithAClearMessage(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend())
	tests := []struct{ url, msg string }{
		{"", `"url" is required`},
		{"ftp://example.com/a/b", `scheme "ftp" is not allowed`},
		{"https://user:pw@github.com/a/b", "credentials"},
		{"http://127.0.0.1/a/b", "blocked destination: 127.0.0.1: loopback"},
		{"http://2130706433/a/b", "blocked destination: 2130706433: non-canonical IPv4"},
		{"http://evil.localhost/a/b", "blocked destination: evil.localhost"},
		{"http://example.org:25/a/b", "blocked destination: example.org:25: port 25 is not allowed"},
		{"git://example.org/a/b", `blocked destination: git://example.org/a/b: scheme "git" is not enabled`},
		{"git@github.com:a/b.git", `scheme "ssh" is not enabled`},
		{"not a url", "space"},
		{"just-words", "not a URL"},
		{"https://github.com/", "no repository path"},
		{"https://github.com/a/b?x=1", "query strings"},
		{"https://github.com/a/../b", "'..'"},
		{"-https://github.com/a/b", "starts with '-'"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			body, _ := json.Marshal(addRequest{URL: tt.url})
			want := http.StatusBadRequest
			if strings.Contains(tt.msg, "blocked destination") || strings.Contains(tt.msg, "is not enabled") {
				want = http.StatusForbidden // a refused destination: 403 blocked_destination
			}
			r := e.do(t, "POST", "/api/v1/repos", body, auth)
			wantError(t, r, want, tt.msg)
			if want == http.StatusForbidden && !strings.Contains(string(r.body), `"code": "blocked_destination"`) {
				t.Errorf("no code blocked_destination: %s", r.body)
			}
		})
	}
	if n := len(e.b.addedCalls()); n != 0 {
		t.Errorf("%d bad URLs reached the backend", n)
	}
}

func TestAddRepoBackendErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
	}{
		{"coordinator unreachable", errors.New("coordinator: connection refused"), http.StatusServiceUnavailable},
		{"rejected by the backend's own validation", fmt.Errorf("catalog: %w", errInvalidForTest), http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFakeBackend()
			b.addErr = tt.err
			e := newTestEnv(t, Config{}, b)
			wantError(t, e.do(t, "POST", "/api/v1/repos", []byte(`{"url": "https://github.com/a/b"}`), auth), tt.status, tt.err.Error())
		})
	}
}

func TestRemoveRepo(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend("github.com/a/b"))
	r := e.do(t, "DELETE", "/api/v1/repos/github.com/a/b", nil, auth)
	if r.status != http.StatusNoContent {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if e.b.Known("github.com/a/b") {
		t.Error("repository still known")
	}
	wantError(t, e.do(t, "DELETE", "/api/v1/repos/github.com/a/b", nil, auth), http.StatusNotFound, "not mirrored")
}

// TestEveryRefusalIsA4xxWithAJSONMessage goes through the ways a request
// can be wrong: each is refused with a 4xx and a message, before it
// reaches the backend.
func TestEveryRefusalIsA4xxWithAJSONMessage(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend("github.com/a/b"))
	big := `{"url": "https://github.com/a/b", "attrs": {"x": "` + strings.Repeat("a", 1<<20) + `"}}`
	tests := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		msg                      string
	}{
		{"add without a token", "POST", "/api/v1/repos", `{"url": "https://github.com/x/y"}`, nil, 401, "needs an API token"},
		{"add with a wrong token", "POST", "/api/v1/repos", `{"url": "https://github.com/x/y"}`, []string{"Authorization: Bearer nope"}, 401, "wrong API token"},
		{"add with another scheme", "POST", "/api/v1/repos", `{"url": "https://github.com/x/y"}`, []string{"Authorization: Basic " + testToken}, 401, "needs an API token"},
		{"add with an empty bearer token", "POST", "/api/v1/repos", `{"url": "https://github.com/x/y"}`, []string{"Authorization: Bearer "}, 401, "wrong API token"},
		{"remove without a token", "DELETE", "/api/v1/repos/github.com/a/b", "", nil, 401, "token"},
		{"fetch without a token", "POST", "/api/v1/repos/github.com/a/b/fetch", "", nil, 401, "token"},
		{"malformed JSON", "POST", "/api/v1/repos", `{"url": `, []string{auth}, 400, "malformed JSON"},
		{"not an object", "POST", "/api/v1/repos", `["https://github.com/x/y"]`, []string{auth}, 400, "malformed JSON"},
		{"unknown field", "POST", "/api/v1/repos", `{"url": "https://github.com/x/y", "branch": "main"}`, []string{auth}, 400, `unknown field "branch"`},
		{"two JSON values", "POST", "/api/v1/repos", `{"url": "https://github.com/x/y"} {}`, []string{auth}, 400, "data after"},
		{"attribute named url", "POST", "/api/v1/repos", `{"url": "https://github.com/x/y", "attrs": {"url": "z"}}`, []string{auth}, 400, "attribute name"},
		{"oversized body", "POST", "/api/v1/repos", big, []string{auth}, 413, "larger than"},
		{"fetch of an unknown repository", "POST", "/api/v1/repos/github.com/x/y/fetch", "", []string{auth}, 404, "not mirrored"},
		{"fetch with a bad wait", "POST", "/api/v1/repos/github.com/a/b/fetch?wait=soon", "", []string{auth}, 400, "wait"},
		{"fetch with a negative wait", "POST", "/api/v1/repos/github.com/a/b/fetch?wait=-1s", "", []string{auth}, 400, "wait"},
		{"fetch of a bad key", "POST", "/api/v1/repos/github.com/a/.b/fetch", "", []string{auth}, 400, "starts with '.'"},
		{"unknown task", "GET", "/api/v1/tasks/nope", "", nil, 404, "no such task"},
		{"unknown endpoint", "GET", "/api/v1/nope", "", nil, 404, "no such endpoint"},
		{"unknown API version", "GET", "/api/v2/repos", "", nil, 404, "no such endpoint"},
		{"unknown webhook host", "POST", "/hooks/bitbucket", "{}", nil, 404, "no such endpoint"},
		{"PUT on the repository list", "PUT", "/api/v1/repos", "{}", []string{auth}, 405, "not allowed"},
		{"PUT on a repository", "PUT", "/api/v1/repos/github.com/a/b", "{}", []string{auth}, 405, "not allowed"},
		{"PATCH of a repository not mirrored", "PATCH", "/api/v1/repos/github.com/a/none", `{"attrs":{}}`, []string{auth}, 404, "not mirrored"},
		{"PATCH without a token", "PATCH", "/api/v1/repos/github.com/a/b", `{"attrs":{}}`, nil, 401, "API token"},
		{"POST on a repository (not .../fetch)", "POST", "/api/v1/repos/github.com/a/b", "", []string{auth}, 405, "not allowed"},
		{"GET on fetch", "GET", "/api/v1/repos/github.com/a/b/fetch", "", nil, 404, "not mirrored"},
		{"DELETE on a task", "DELETE", "/api/v1/tasks/x", "", []string{auth}, 405, "not allowed"},
		{"POST on nodes", "POST", "/api/v1/nodes", "", []string{auth}, 405, "not allowed"},
		{"POST on events", "POST", "/api/v1/events", "", []string{auth}, 405, "not allowed"},
		{"PUT on the OpenAPI file", "PUT", "/api/v1/openapi.json", "", []string{auth}, 405, "not allowed"},
		{"GET on a webhook", "GET", "/hooks/github", "", nil, 405, "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, e.do(t, tt.method, tt.path, []byte(tt.body), tt.headers...), tt.status, tt.msg)
		})
	}
	if n := len(e.b.addedCalls()); n != 0 {
		t.Errorf("%d refused requests reached AddRepo", n)
	}
	e.b.noStart(t)

	// The scheme's case does not matter.
	if r := e.do(t, "POST", "/api/v1/repos", []byte(`{"url": "https://github.com/x/y"}`), "Authorization: bearer "+testToken); r.status != http.StatusCreated {
		t.Errorf("lower-case bearer: status %d: %s", r.status, r.body)
	}
}

func TestMethodNotAllowedSaysWhatIs(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend())
	r := e.do(t, "PUT", "/api/v1/repos", nil)
	if got := r.header.Get("Allow"); got != "GET, POST" {
		t.Errorf("Allow %q, want %q", got, "GET, POST")
	}
}

func TestWritesAreRefusedWithoutAConfiguredToken(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend())
	e.srv.cfg.Token = "" // newTestEnv always sets one
	wantError(t, e.do(t, "POST", "/api/v1/repos", []byte(`{"url": "https://github.com/x/y"}`), "Authorization: Bearer "), http.StatusForbidden, "no API token configured")
}

func TestFetchAnswers202WithATaskAndJoinsAQueuedOne(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend("github.com/a/b"))
	r := e.do(t, "POST", "/api/v1/repos/github.com/a/b/fetch", nil, auth)
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var first Task
	r.decode(t, &first)
	if first.Key != "github.com/a/b" || first.State != TaskQueued || first.ID == "" {
		t.Errorf("task %+v", first)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/tasks/"+first.ID {
		t.Errorf("Location %q", loc)
	}
	if c := e.b.nextStart(t); c.key != "github.com/a/b" || c.id != first.ID {
		t.Errorf("StartFetch(%s, %s), want (github.com/a/b, %s)", c.key, c.id, first.ID)
	}

	var second Task
	e.do(t, "POST", "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &second)
	if second.ID != first.ID {
		t.Errorf("second request got task %s, want it to join %s", second.ID, first.ID)
	}
	e.b.noStart(t)

	var got Task
	e.do(t, "GET", "/api/v1/tasks/"+first.ID, nil).decode(t, &got)
	if got.ID != first.ID || got.State != TaskQueued {
		t.Errorf("GET task: %+v", got)
	}
}

func TestFetchWaitReturnsTheResult(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	e := newTestEnv(t, Config{}, b)
	b.onStart = func(_, id string) {
		e.tasks.Running(id)
		e.clk.Advance(250 * time.Millisecond)
		e.tasks.Finish(id, TaskResult{OldRefs: map[string]string{"refs/heads/main": "1111"}, NewRefs: map[string]string{"refs/heads/main": "2222"}})
	}
	r := e.do(t, "POST", "/api/v1/repos/github.com/a/b/fetch?wait=30s", nil, auth)
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200 for a finished task: %s", r.status, r.body)
	}
	var got Task
	r.decode(t, &got)
	if got.State != TaskDone || got.NewRefs["refs/heads/main"] != "2222" || got.OldRefs["refs/heads/main"] != "1111" || got.DurationMs != 250 {
		t.Errorf("task %+v", got)
	}
}

func TestFetchWaitEndsAtItsLimitWithTheCurrentState(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	e := newTestEnv(t, Config{}, b)
	b.onStart = func(_, id string) { e.tasks.Running(id) }
	done := make(chan response, 1)
	go func() { done <- e.do(t, "POST", "/api/v1/repos/github.com/a/b/fetch?wait=10", nil, auth) }()
	var r response
	eventually(t, e.clk, time.Second, func() bool {
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var got Task
	r.decode(t, &got)
	if got.State != TaskRunning {
		t.Errorf("state %s, want running", got.State)
	}
	if waited := e.clk.Now().Sub(epoch); waited < 10*time.Second {
		t.Errorf("answered after %v of clock time, want the 10s asked for", waited)
	}
}

func TestGetTaskWaitsForTheEnd(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend("github.com/a/b"))
	task, _ := e.tasks.Request("github.com/a/b")
	done := make(chan response, 1)
	go func() { done <- e.do(t, "GET", "/api/v1/tasks/"+task.ID+"?wait=60s", nil, auth) }()
	e.tasks.Running(task.ID)
	e.tasks.Finish(task.ID, TaskResult{Err: "upstream: repository not found"})
	r := <-done
	var got Task
	r.decode(t, &got)
	if r.status != http.StatusOK || got.State != TaskFailed || got.Error != "upstream: repository not found" {
		t.Errorf("status %d task %+v", r.status, got)
	}
}

func TestAFetchThatCannotStartFails(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	b.startErr = errors.New("owner node 3 is gone")
	e := newTestEnv(t, Config{}, b)
	var task Task
	e.do(t, "POST", "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &task)
	got, err := e.tasks.Wait(context.Background(), task.ID)
	if err != nil || got.State != TaskFailed || !strings.Contains(got.Error, "owner node 3 is gone") {
		t.Errorf("task %+v, err %v", got, err)
	}
}

func TestNodes(t *testing.T) {
	b := newFakeBackend()
	b.nodes = []Node{{ID: 1, Name: "full", Mode: "full", State: "alive", LastHeartbeat: epoch, Repos: 10, DiskUsed: 1 << 30, DiskTotal: 1 << 40,
		History: []Transition{{From: "alive", To: "suspect", At: epoch.Add(-time.Hour)}}, Flapping: true}}
	e := newTestEnv(t, Config{}, b)
	r := e.do(t, "GET", "/api/v1/nodes", nil)
	var got struct{ Nodes []Node }
	r.decode(t, &got)
	if r.status != http.StatusOK || len(got.Nodes) != 1 || got.Nodes[0].Name != "full" || !got.Nodes[0].Flapping || len(got.Nodes[0].History) != 1 {
		t.Errorf("status %d nodes %+v", r.status, got)
	}

	b.nodesErr = errors.New("coordinator unreachable")
	wantError(t, e.do(t, "GET", "/api/v1/nodes", nil, auth), http.StatusServiceUnavailable, "coordinator unreachable")
	wantError(t, e.do(t, "GET", "/api/v1/nodes", nil), http.StatusServiceUnavailable, "out of reach")
}

// TestOpenAPIDocumentsEveryRoute checks the served OpenAPI file against
// the routes: each documented operation exists, and each route is
// documented.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: map[string]string{"": "x"}}, newFakeBackend())
	r := e.do(t, "GET", "/api/v1/openapi.json", nil)
	var spec struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	r.decode(t, &spec)
	if r.status != http.StatusOK || !strings.HasPrefix(spec.OpenAPI, "3.") {
		t.Fatalf("status %d, openapi %q", r.status, spec.OpenAPI)
	}
	var documented []string
	for path, ops := range spec.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(documented)
	routes := []string{
		"DELETE /api/v1/repos/{key}", "GET /api/v1/catalog", "GET /api/v1/events", "GET /api/v1/feeds", "GET /api/v1/log", "GET /api/v1/nodes", "GET /api/v1/openapi.json",
		"GET /api/v1/repos", "GET /api/v1/repos/{key}", "GET /api/v1/repos/{key}/archive", "GET /api/v1/repos/{key}/log", "GET /api/v1/tasks", "GET /api/v1/tasks/{id}",
		"PATCH /api/v1/repos/{key}", "POST /api/v1/catalog/confirm-purge", "POST /api/v1/nodes/{id}/revoke", "POST /api/v1/repos",
		"POST /api/v1/repos/{key}/fetch", "POST /api/v1/tasks/{id}/cancel", "POST /hooks/gitee", "POST /hooks/github", "POST /hooks/gitlab",
	}
	if !slices.Equal(documented, routes) {
		t.Errorf("documented operations:\n%v\nroutes:\n%v", documented, routes)
	}
	for _, op := range routes {
		method, path, _ := strings.Cut(op, " ")
		path = strings.NewReplacer("{key}", "github.com/a/b", "{id}", "x").Replace(path)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, method, e.ts.URL+path, nil)
		resp, err := e.ts.Client().Do(req) // returns at the headers, even for the event stream
		if err != nil {
			t.Fatal(err)
		}
		var body apiError
		_ = json.NewDecoder(resp.Body).Decode(&body)
		cancel()
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed || strings.HasPrefix(body.Error, "no such endpoint") {
			t.Errorf("%s: documented but not served (%d %s)", op, resp.StatusCode, body.Error)
		}
	}
}

func TestCatalogStatusAndPurgeConfirmation(t *testing.T) {
	b := newFakeBackend()
	b.pending = &PendingPurge{Commit: "abc", Removed: 40, Total: 100}
	srv := httptest.NewServer(New(Config{Token: "t"}, b.fleet(), NewTasks(clock.NewFake(time.Unix(0, 0)), 10), NewBroker(0, 0, nil), nil, clock.NewFake(time.Unix(0, 0))))
	defer srv.Close()
	get := func() CatalogStatus {
		resp, err := http.Get(srv.URL + "/api/v1/catalog")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st CatalogStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := get(); st.Pending == nil || st.Pending.Removed != 40 {
		t.Fatalf("status %+v", st)
	}
	post := func(token string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/catalog/confirm-purge", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", code)
	}
	if code := post("t"); code != http.StatusOK {
		t.Fatalf("confirm: %d", code)
	}
	if st := get(); st.Pending != nil {
		t.Fatalf("still pending: %+v", st)
	}
	if code := post("t"); code != http.StatusConflict {
		t.Fatalf("nothing pending: %d", code)
	}
}

// A catalog that cannot be read is shown as an error with its time; its
// text, which names the operator's catalog, only with the token.
func TestAnUnreadableCatalogIsAnErrorWithItsTime(t *testing.T) {
	b := newFakeBackend()
	since := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	b.catalogErr = "catalog: fetch /srv/catalog: git fetch: fatal: '/srv/catalog' does not appear to be a git repository"
	b.catalogErrAt = &since
	srv := httptest.NewServer(New(Config{Token: "t"}, b.fleet(), NewTasks(clock.NewFake(time.Unix(0, 0)), 10), NewBroker(0, 0, nil), nil, clock.NewFake(time.Unix(0, 0))))
	defer srv.Close()
	get := func(token string) map[string]any {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/catalog", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d: %v", resp.StatusCode, err)
		}
		return st
	}
	op := get("t")
	if op["error"] != b.catalogErr || op["error_at"] != "2026-11-27T10:00:00Z" || op["commit"] != "c0ffee" {
		t.Errorf("the operator sees %v", op)
	}
	anon := get("")
	if e, _ := anon["error"].(string); e == "" || strings.Contains(e, "/srv/catalog") || anon["error_at"] != "2026-11-27T10:00:00Z" {
		t.Errorf("an anonymous reader sees %v; want the error's class and its time", anon)
	}
	b.catalogErr, b.catalogErrAt = "", nil
	if st := get(""); st["error"] != nil || st["error_at"] != nil {
		t.Errorf("a catalog that is read: %v", st)
	}
	// Where it comes from: a path on the coordinator's machine is the
	// operator's, as in the error's text; a URL anyone may see.
	b.catalogURL = "/srv/catalog"
	if op, anon := get("t"), get(""); op["url"] != "/srv/catalog" || anon["url"] != nil {
		t.Errorf("a local catalog: the operator sees url %v, an anonymous reader %v", op["url"], anon["url"])
	}
	b.catalogURL = "https://REDACTED@git.example.org/catalog.git"
	if anon := get(""); anon["url"] != b.catalogURL {
		t.Errorf("a catalog fetched from a URL: an anonymous reader sees url %v", anon["url"])
	}
}

// Only a network URL of the catalog is public; paths, file:// URLs and
// relative paths are not.
func TestPublicCatalogURL(t *testing.T) {
	for u, want := range map[string]string{
		"https://git.example.org/catalog.git": "https://git.example.org/catalog.git",
		"ssh://git@git.example.org/catalog":   "ssh://git@git.example.org/catalog",
		"git@git.example.org:fleet/catalog":   "git@git.example.org:fleet/catalog",
		"/srv/gitfleet/catalog":               "",
		"./catalog":                           "",
		"catalog":                             "",
		"FILE:///srv/gitfleet/catalog":        "",
		"":                                    "",
	} {
		if got := PublicCatalogURL(u); got != want {
			t.Errorf("PublicCatalogURL(%q) = %q, want %q", u, got, want)
		}
	}
}
