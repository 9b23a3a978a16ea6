package coordinator

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// renamedStateOf is key's state as nodes and the API are told, and its new name.
func (c *Coordinator) renamedStateOf(key repokey.Key) (repostate.State, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.status[key]
	if r == nil {
		r = &repoStatus{}
	}
	st, _ := c.stateSince(key, r)
	if st != repostate.Renamed {
		return st, ""
	}
	return st, c.renames[key].to
}

// The forge answers a lookup of o/old under o/new with the same number:
// renamed, with the new key. Then the forge answers o/old under its own
// name with another number: a repository made anew under the old name,
// not the renamed one back: the rename ends, and the log says which.
func TestAFeedsRenameIsShownAndANewRepositoryUnderTheOldNameEndsIt(t *testing.T) {
	gh := &hostileGraphQL{}
	srv := httptest.NewServer(gh)
	t.Cleanup(srv.Close)
	api, err := url.Parse(srv.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1.7e9, 0))
	c, err := New(context.Background(), Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), JoinToken: testJoin,
		FullToken: testFull, Feeds: FeedConfig{Forges: forge.Config{
			Forges: map[string]forge.Forge{"github.com": {Host: "github.com", Kind: forge.GitHub, API: api}},
			Tokens: map[string][]forge.Token{"github.com": {forge.NewToken("feed-token")}}}}},
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	for _, p := range []string{"o/old", "o/kept"} {
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://github.com/" + p}); err != nil {
			t.Fatal(err)
		}
	}
	feeds := c.startFeeds()
	if len(feeds) != 1 {
		t.Fatalf("%d feeds, want github.com's", len(feeds))
	}
	pushed := clk.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	repo := func(name string, id int) map[string]any {
		return map[string]any{"pushedAt": pushed, "nameWithOwner": name, "databaseId": id}
	}
	ask := func(answers map[string]map[string]any) {
		t.Helper()
		clk.Advance(48 * time.Hour) // every repository is due again
		gh.set(answers)
		if _, err := c.askFeed(context.Background(), feeds[0], clk.Now()); err != nil {
			t.Fatalf("the feed's request failed: %v", err)
		}
	}

	ask(map[string]map[string]any{"o/old": repo("o/old", 7), "o/kept": repo("o/kept", 8)})
	if st, _ := c.renamedStateOf("github.com/o/old"); st == repostate.Renamed {
		t.Fatal("renamed before any rename")
	}
	ask(map[string]map[string]any{"o/old": repo("New-Owner/New", 7), "o/kept": repo("o/kept", 8)})
	if st, to := c.renamedStateOf("github.com/o/old"); st != repostate.Renamed || to != "github.com/new-owner/new" {
		t.Fatalf("after the rename: %s to %q, want renamed to github.com/new-owner/new", st, to)
	}
	if st, _ := c.renamedStateOf("github.com/o/kept"); st == repostate.Renamed {
		t.Error("a repository answered under its own name is renamed")
	}
	// Asked again, the same: one log line of it, not one an answer.
	ask(map[string]map[string]any{"o/old": repo("New-Owner/New", 7), "o/kept": repo("o/kept", 8)})
	if n := strings.Count(logs.String(), "a repository was renamed upstream"); n != 1 {
		t.Errorf("the rename was logged %d times, want once", n)
	}
	ask(map[string]map[string]any{"o/old": repo("o/old", 99), "o/kept": repo("o/kept", 8)})
	if st, _ := c.renamedStateOf("github.com/o/old"); st == repostate.Renamed {
		t.Error("a new repository under the old name (another number) left the key renamed")
	}
	if !strings.Contains(logs.String(), "made anew under the name") {
		t.Errorf("the new number is not logged as a new repository:\n%s", logs.String())
	}
}

// A node's renamed_to is a node's word: checked as a key again; another
// host's key is kept for showing; a check that works at the old path
// ends it; the forge's word stands over it.
func TestACheckResultsRedirectIsCheckedAndEndsWhenTheOldPathAnswers(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	c.mu.Lock()
	defer c.mu.Unlock()
	key := repokey.Key("github.com/o/old")
	for _, bad := range []string{"../etc/passwd", "github.com/o/old", "github.com/-x/y", "no-path"} {
		c.checkRenamed(key, false, bad, 1)
		if _, had := c.renames[key]; had {
			t.Fatalf("renamed_to %q was taken", bad)
		}
	}
	c.checkRenamed(key, false, "elsewhere.example/o/new", 5)
	if r := c.renames[key]; r.to != "elsewhere.example/o/new" || !r.byGit || r.since != 5 {
		t.Fatalf("a redirect to another host: %+v", r)
	}
	c.checkRenamed(key, true, "", 6)
	if _, had := c.renames[key]; had {
		t.Fatal("a check that worked at the old path left the rename")
	}
	c.setRenamed(key, "github.com/o/new", false, 7)
	c.checkRenamed(key, false, "github.com/o/other", 8)
	c.checkRenamed(key, true, "", 9)
	if r := c.renames[key]; r.to != "github.com/o/new" {
		t.Fatalf("a git server's word replaced or ended the forge's: %+v", r)
	}
}

// A GitLab feed: the project answers its path with its number; then the
// old path answers 404 (its redirect gone) and the number answers the new
// path: renamed, found by the number.
func TestAGitLabProjectWhoseOldPathIsGoneIsFoundRenamedByItsNumber(t *testing.T) {
	var moved atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.EscapedPath() == "/api/v4/projects/g%2Fold" && !moved.Load():
			io.WriteString(w, `{"id": 42, "path_with_namespace": "g/old", "last_activity_at": "2023-01-01T00:00:00Z"}`)
		case r.URL.EscapedPath() == "/api/v4/projects/42" && moved.Load():
			io.WriteString(w, `{"id": 42, "path_with_namespace": "h/new", "last_activity_at": "2023-01-01T00:00:00Z"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"404 Project Not Found"}`)
		}
	}))
	t.Cleanup(srv.Close)
	api, err := url.Parse(srv.URL + "/api/v4")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1.7e9, 0))
	c, err := New(context.Background(), Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), JoinToken: testJoin,
		FullToken: testFull, Feeds: FeedConfig{Forges: forge.Config{
			Forges: map[string]forge.Forge{"gitlab.com": {Host: "gitlab.com", Kind: forge.GitLab, API: api}}},
			Client: forge.Options{Pace: -1}}},
		slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://gitlab.com/g/old"}); err != nil {
		t.Fatal(err)
	}
	feeds := c.startFeeds()
	if len(feeds) != 1 {
		t.Fatalf("%d feeds, want gitlab.com's", len(feeds))
	}
	for _, move := range []bool{false, true} {
		moved.Store(move)
		clk.Advance(48 * time.Hour)
		if _, err := c.askFeed(context.Background(), feeds[0], clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if st, to := c.renamedStateOf("gitlab.com/g/old"); st != repostate.Renamed || to != "gitlab.com/h/new" {
		t.Fatalf("%s to %q, want renamed to gitlab.com/h/new", st, to)
	}
}
