package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// archiveBackend is a fake backend whose repositories' archives are a map.
type archiveBackend struct {
	*fakeBackend
	archives map[string][]ArchivedRef // held copies; absent: not held here
}

func (b archiveBackend) Archive(_ context.Context, key repokey.Key) ([]ArchivedRef, error) {
	refs, ok := b.archives[key.String()]
	if !ok {
		return nil, fmt.Errorf("archive of %s: %w", key, ErrNotFound)
	}
	return refs, nil
}

// GET /api/v1/repos/{key}/archive lists a repository's archive refs (ref,
// old id, time; the old id with the API token alone), an empty list when it has none, 404 for a repository not
// mirrored or not held here, and is the repository itself when its own
// key ends in /archive.
func TestTheArchiveOfARepositoryIsListed(t *testing.T) {
	b := newFakeBackend("github.com/a/b", "github.com/a/c", "github.com/a/elsewhere", "github.com/a/archive")
	at := time.Unix(1765100000, 0).UTC()
	ab := archiveBackend{b, map[string][]ArchivedRef{
		"github.com/a/b": {{Name: "refs/archive/1765100000/refs/heads/main", Ref: "refs/heads/main",
			OID: "1111111111111111111111111111111111111111", At: at}},
		"github.com/a/c": nil,
	}}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &testEnv{b: b, clk: clock.NewFake(epoch), logs: &syncBuffer{}}
	e.tasks = NewTasks(e.clk, 100)
	e.events = NewBroker(16, 8, discard)
	fleet := b.fleet()
	fleet.Archive = ab
	e.srv = New(Config{Token: testToken}, fleet, e.tasks, e.events, discard, e.clk)
	e.ts = httptest.NewServer(e.srv)
	t.Cleanup(func() { e.srv.Close(); e.ts.Close() })

	var page ArchivePage
	r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/b/archive", nil, "Authorization: Bearer "+testToken)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	r.decode(t, &page)
	if page.Key != "github.com/a/b" || len(page.Refs) != 1 || page.Refs[0] != ab.archives["github.com/a/b"][0] {
		t.Fatalf("archive page %+v", page)
	}
	if m := r.json(t); m["refs"].([]any)[0].(map[string]any)["old_id"] != "1111111111111111111111111111111111111111" {
		t.Errorf("the JSON names the old id otherwise: %s", r.body)
	}
	if r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/b/archive", nil); r.status != http.StatusOK ||
		strings.Contains(string(r.body), "1111111111") || !strings.Contains(string(r.body), "refs/heads/main") {
		t.Errorf("without the API token: %d %s, want the ref without its old id", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/c/archive", nil); r.status != http.StatusOK || r.json(t)["refs"] == nil {
		t.Errorf("an empty archive: %d %q, want refs []", r.status, r.body)
	}
	for _, path := range []string{"/api/v1/repos/github.com/x/y/archive", "/api/v1/repos/github.com/a/elsewhere/archive"} {
		if r := e.do(t, http.MethodGet, path, nil); r.status != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", path, r.status, r.body)
		}
	}
	if r := e.do(t, http.MethodGet, "/api/v1/repos/github.com/a/archive", nil); r.status != http.StatusOK || r.json(t)["key"] != "github.com/a/archive" {
		t.Errorf("the repository whose key ends in /archive: %d %s", r.status, r.body)
	}
}
