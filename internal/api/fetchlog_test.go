package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/store"
)

// logBackend is a fake backend with a real fetch log.
type logBackend struct {
	*fakeBackend
	log *fetchlog.Log
}

func (b logBackend) FetchLog(ctx context.Context, q fetchlog.Query) ([]fetchlog.Entry, string, error) {
	return b.log.List(ctx, q)
}

// newLogEnv is newTestEnv with a fetch log behind the backend.
func newLogEnv(t *testing.T, keys ...string) (*testEnv, *fetchlog.Log) {
	t.Helper()
	db, err := store.OpenBolt(filepath.Join(t.TempDir(), "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &testEnv{b: newFakeBackend(keys...), clk: clock.NewFake(epoch), logs: &syncBuffer{}}
	l := fetchlog.New(db, fetchlog.Config{}, e.clk, discard)
	e.tasks = NewTasks(e.clk, 100)
	e.events = NewBroker(16, 8, discard)
	fleet := e.b.fleet()
	fleet.Log = logBackend{e.b, l}
	e.srv = New(Config{Token: testToken}, fleet, e.tasks, e.events, discard, e.clk)
	e.ts = httptest.NewServer(e.srv)
	t.Cleanup(func() { e.srv.Close(); e.ts.Close() })
	return e, l
}

func TestTheFetchLogOfARepositoryAndOfTheFleet(t *testing.T) {
	e, l := newLogEnv(t, "github.com/a/b", "github.com/a/log", "github.com/c/d")
	secret := "git fetch: network: fatal: unable to access 'https://github.com/c/d/': /home/volunteer/.netrc"
	for i := range 5 {
		l.Append(fetchlog.Entry{Key: "github.com/a/b", At: epoch.Add(time.Duration(i) * time.Minute), Kind: "fetch", Node: 1,
			RefsChanged: 1, Refs: []string{"refs/heads/main"}})
	}
	l.Append(fetchlog.Entry{Key: "github.com/c/d", At: epoch.Add(10 * time.Minute), Kind: "check", Node: 2,
		Result: fetchlog.ResultFailed, Error: secret, ErrorClass: repostate.ClassUnreachable.String()})
	l.Append(fetchlog.Entry{Key: "github.com/a/log", At: epoch.Add(11 * time.Minute), Kind: "check", Node: 2})

	var page LogPage
	r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/b/log?limit=2", nil)
	page = LogPage{}
	r.decode(t, &page)
	if r.status != http.StatusOK || len(page.Entries) != 2 || !page.Entries[0].At.Equal(epoch.Add(4*time.Minute)) || page.Next == "" {
		t.Fatalf("first page: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/b/log?limit=10&before="+page.Next, nil)
	page = LogPage{}
	r.decode(t, &page)
	if len(page.Entries) != 3 || !page.Entries[0].At.Equal(epoch.Add(2*time.Minute)) || page.Next != "" {
		t.Fatalf("second page: %s", r.body)
	}
	// A repository whose key ends in "log" is the repository, not a log.
	if r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/log", nil); r.status != http.StatusOK || r.json(t)["key"] != "github.com/a/log" {
		t.Errorf("GET of github.com/a/log: %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/x/y/log", nil); r.status != http.StatusNotFound {
		t.Errorf("the log of an unknown repository: %d %s", r.status, r.body)
	}

	// The fleet's failures: the public sees the class, the operator the text.
	r = e.do(t, http.MethodGet, "/api/v1/log?state=failed&since=2026-03-01T12:05:00Z", nil)
	page = LogPage{}
	r.decode(t, &page)
	if len(page.Entries) != 1 || page.Entries[0].Error != "upstream unreachable" || page.Entries[0].ErrorClass != "upstream unreachable" {
		t.Fatalf("public failures: %s", r.body)
	}
	r = e.do(t, http.MethodGet, "/api/v1/log?state=failed", nil, auth)
	page = LogPage{}
	r.decode(t, &page)
	if len(page.Entries) != 1 || page.Entries[0].Error != secret {
		t.Fatalf("the operator's failures: %s", r.body)
	}
	r = e.do(t, http.MethodGet, "/api/v1/log?node=2", nil)
	page = LogPage{}
	r.decode(t, &page)
	if len(page.Entries) != 2 || page.Entries[0].Key != "github.com/a/log" {
		t.Errorf("node 2's entries: %s", r.body)
	}
	r = e.do(t, http.MethodGet, "/api/v1/log?since=2026-03-01T12:03:00Z&key=github.com/a/b", nil)
	page = LogPage{}
	r.decode(t, &page)
	if len(page.Entries) != 2 {
		t.Errorf("github.com/a/b since minute 3: %s", r.body)
	}
	for _, bad := range []string{"state=broken", "since=yesterday", "limit=0", "node=x", "before=a/b"} {
		if r := e.do(t, http.MethodGet, "/api/v1/log?"+bad, nil); r.status != http.StatusBadRequest {
			t.Errorf("?%s: status %d, want 400", bad, r.status)
		}
	}
}

func TestAServerWithoutAFetchLogSaysSo(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend("github.com/a/b"))
	if r := e.do(t, http.MethodGet, "/api/v1/log", nil); r.status != http.StatusNotImplemented {
		t.Errorf("status %d, want 501", r.status)
	}
}

// The old IDs of a force-push (the entry's rewrites, and the old ID of
// the moved ref) are the operator's: an anonymous reader of the log, of a
// repository's log or of its detail sees the entry, the new IDs and a
// count of the rewrites, never an old ID.
func TestTheOldIDsOfAForcePushAreReadOnlyWithTheAPIToken(t *testing.T) {
	e, l := newLogEnv(t, "github.com/a/b")
	old, nw, kept := strings.Repeat("1", 40), strings.Repeat("2", 40), strings.Repeat("3", 40)
	rw := []fetchlog.Rewrite{{Ref: "refs/heads/main", Old: old, New: nw}}
	l.Append(fetchlog.Entry{Key: "github.com/a/b", At: epoch, Kind: "fetch", Node: 1, Changed: true, RefsChanged: 2,
		Refs:     []string{"refs/heads/dev", "refs/heads/main"},
		Moves:    []fetchlog.Move{{Ref: "refs/heads/dev", Old: kept, New: nw}, {Ref: "refs/heads/main", Old: old, New: nw}},
		Rewrites: rw})
	e.b.mu.Lock()
	d := e.b.repos["github.com/a/b"]
	d.History = []HistoryEntry{{At: epoch, Kind: "fetch", Changed: true, Rewrites: rw}}
	e.b.repos["github.com/a/b"] = d
	e.b.mu.Unlock()

	for _, path := range []string{"/api/v1/log", "/api/v1/repos/github.com/a/b/log"} {
		r := e.do(t, http.MethodGet, path, nil)
		var page LogPage
		r.decode(t, &page)
		if r.status != http.StatusOK || len(page.Entries) != 1 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		got := page.Entries[0]
		if strings.Contains(string(r.body), old) || got.Rewrites != nil || got.RewritesOmitted != 1 {
			t.Errorf("GET %s without the token: %s; want no old ID, rewrites_omitted 1", path, r.body)
		}
		if len(got.Moves) != 2 || got.Moves[0].Old != kept || got.Moves[1].New != nw {
			t.Errorf("GET %s without the token: moves %+v, want dev's old ID and main's new one kept", path, got.Moves)
		}
		r = e.do(t, http.MethodGet, path, nil, auth)
		page = LogPage{}
		r.decode(t, &page)
		if len(page.Entries) != 1 || !slices.Equal(page.Entries[0].Rewrites, rw) || page.Entries[0].Moves[1].Old != old {
			t.Errorf("GET %s with the token: %s; want the rewrites and main's old ID", path, r.body)
		}
	}
	r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/b", nil)
	var detail RepoDetail
	r.decode(t, &detail)
	if r.status != http.StatusOK || strings.Contains(string(r.body), old) || len(detail.History) != 1 || detail.History[0].RewritesOmitted != 1 {
		t.Errorf("the detail without the token: %d %s; want no old ID, rewrites_omitted 1", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/b", nil, auth); !strings.Contains(string(r.body), old) {
		t.Errorf("the detail with the token: %s; want the old ID", r.body)
	}
}
