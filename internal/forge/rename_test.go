package forge

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A Gitea-like API that redirects a renamed repository's old path, as
// Gitea's API does, to wherever the test says (some targets hostile), and
// answers the new path with the repository and its id.
func TestRESTLookupReadsARedirectAsARenameAndFollowsNone(t *testing.T) {
	clk := clock.NewFake(t0)
	var asked atomic.Int32
	var location string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/repos/old/name":
			w.Header().Set("Location", location)
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/repos/new/name":
			io.WriteString(w, `{"id": 4242, "full_name": "new/name", "updated_at": "2026-01-01T00:00:00Z"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	l := testClient(t, Gitea, srv, clk, nil).(Lookup)
	for _, tc := range []struct {
		location, want string
	}{
		{"/repos/new/name", "new/name"},
		{srv.URL + "/repos/new/name", "new/name"},
		{"/repos/new/name?token=x", "new/name"},                                          // the query is dropped: it names nothing
		{"http://127.0.0.2:1/repos/new/name", ""},                                        // another host: not the forge's word
		{"/repos/new/../../etc/passwd", ""},                                              // climbs
		{"/repos/new/%2e%2e", ""},                                                        // escaped
		{"http://u:p@" + strings.TrimPrefix(srv.URL, "http://") + "/repos/new/name", ""}, // credentials
		{"/user/settings", ""},                                                           // not a repository of the API
		{"/repos/old/name", ""},                                                          // to itself: a loop, not a rename
		{"", ""},
	} {
		location = tc.location
		before := asked.Load()
		a, err := l.PushedAt(context.Background(), []string{"old/name"})
		if err != nil {
			t.Fatalf("Location %q: %v", tc.location, err)
		}
		if n := asked.Load() - before; n != 1 {
			t.Errorf("Location %q: %d requests, want 1 (no redirect followed)", tc.location, n)
		}
		got := ""
		if len(a.Renamed) == 1 {
			got = a.Renamed[0].To
		}
		if got != tc.want || (tc.want == "" && a.Refused != 1) || len(a.Pushed)+len(a.Missing) != 0 {
			t.Errorf("Location %q: answer %+v, want renamed to %q (or refused)", tc.location, a, tc.want)
		}
	}
	a, err := l.PushedAt(context.Background(), []string{"new/name"})
	if err != nil || fmt.Sprint(a.IDs) != "[{new/name 4242}]" {
		t.Errorf("the repository's id: %+v, %v; want 4242", a.IDs, err)
	}
	if ids := IDs(repokey.Folding{}, "gitea.example", a); ids["gitea.example/new/name"] != 4242 {
		t.Errorf("IDs by key: %v", ids)
	}
}

// GitLab is asked by the project's number: the old path answers 404 (its
// redirect gone), the number answers the new path: a rename, with the
// same number. A forge without a lookup by number (Gitee) asks nothing.
func TestGitLabFindsARenamedProjectByItsNumber(t *testing.T) {
	clk := clock.NewFake(t0)
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.EscapedPath())
		w.Header().Set("Content-Type", "application/json")
		if r.URL.EscapedPath() == "/projects/42" {
			io.WriteString(w, `{"id": 42, "path_with_namespace": "group/sub/new-name", "last_activity_at": "2026-01-01T00:00:00Z"}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"404 Project Not Found"}`)
	}))
	defer srv.Close()
	gl := testClient(t, GitLab, srv, clk, nil).(ByID)
	a, asked, err := gl.PushedAtByID(context.Background(), "group/old-name", 42)
	if err != nil || !asked {
		t.Fatalf("asked %v: %v", asked, err)
	}
	if len(a.Renamed) != 1 || a.Renamed[0].From != "group/old-name" || a.Renamed[0].To != "group/sub/new-name" || fmt.Sprint(a.IDs) != "[{group/old-name 42}]" {
		t.Errorf("answer %+v: want group/old-name renamed to group/sub/new-name, number 42", a)
	}
	if a, _, err := gl.PushedAtByID(context.Background(), "group/gone", 43); err != nil || fmt.Sprint(a.Missing) != "[group/gone]" {
		t.Errorf("a number the forge does not know: %+v, %v", a, err)
	}
	if fmt.Sprint(paths) != "[/projects/42 /projects/43]" {
		t.Errorf("asked %v", paths)
	}
	ge := testClient(t, Gitee, srv, clk, nil, "tok").(ByID)
	if _, asked, _ := ge.PushedAtByID(context.Background(), "o/r", 42); asked || len(paths) != 2 {
		t.Errorf("Gitee asked by number (asked %v, %v)", asked, paths)
	}
}
