package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// hostileGraphQL is a forge's GraphQL endpoint that answers each asked
// repository with the object it is given for its path: its own made-up
// nameWithOwner, parent and all.
type hostileGraphQL struct {
	mu      sync.Mutex
	answers map[string]map[string]any // "owner/name" -> the repository object
}

func (g *hostileGraphQL) set(answers map[string]map[string]any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answers = answers
}

func (g *hostileGraphQL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query     string            `json:"query"`
		Variables map[string]string `json:"variables"`
	}
	if r.URL.Path != "/api/graphql" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	reset := time.Now().Add(time.Hour)
	data := map[string]any{"rateLimit": map[string]any{"cost": 1, "remaining": 4999, "limit": 5000,
		"resetAt": reset.UTC().Format(time.RFC3339)}}
	g.mu.Lock()
	for _, m := range graphQLAlias.FindAllStringSubmatch(req.Query, -1) {
		if obj, ok := g.answers[req.Variables[m[2]]+"/"+req.Variables[m[3]]]; ok {
			data[m[1]] = obj
		}
	}
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// A forge that answers the feed with names of its making: one that
// carries the feed's own token (of no form a redactor knows), a fork's
// parent that does, one that climbs with "../", one with a terminal's
// control characters. None of them reaches the log or the fleet's state;
// the refusals are logged, counted, without the names; a plain rename
// is still reported.
func TestAForgesMadeUpNamesReachNeitherTheLogNorTheState(t *testing.T) {
	const token = "feed-token-Zq81xW7pLm"
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
			Tokens: map[string][]forge.Token{"github.com": {forge.NewToken(token)}}}}},
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	paths := []string{"o/renamed", "o/fork", "o/climb", "o/ctl", "o/plain"}
	for _, p := range paths {
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://github.com/" + p}); err != nil {
			t.Fatal(err)
		}
	}
	feeds := c.startFeeds()
	if len(feeds) != 1 {
		t.Fatalf("%d feeds, want github.com's", len(feeds))
	}
	pushed := clk.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	repo := func(name string) map[string]any { return map[string]any{"pushedAt": pushed, "nameWithOwner": name} }
	fork := repo("o/fork")
	fork["parent"] = map[string]any{"nameWithOwner": "o/" + token}
	// Two rounds: an answer with a name that is no name at all once failed
	// whole, and would hide whether the first round's names were logged.
	rounds := []map[string]map[string]any{
		{"o/renamed": repo("o/" + token), "o/fork": fork, "o/plain": repo("o/plain-new")},
		{"o/climb": repo("../../etc/passwd"), "o/ctl": repo("o/x\x1b[2J\x1b[31mred"), "o/plain": repo("o/plain-new")},
	}
	for _, answers := range rounds {
		clk.Advance(48 * time.Hour) // every repository is due again
		gh.set(answers)
		if _, err := c.askFeed(context.Background(), feeds[0], clk.Now()); err != nil {
			t.Logf("the feed's request failed: %v", err)
		}
	}

	out := logs.String()
	for _, leak := range []string{token, "../", "etc/passwd", "\x1b", `\x1b`, `\u001b`, "[2J"} {
		if strings.Contains(out, leak) {
			t.Errorf("the log holds %q:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "to=github.com/o/plain-new") {
		t.Errorf("the plain rename is not reported:\n%s", out)
	}
	if !strings.Contains(out, "refused=") {
		t.Errorf("the refused names are not reported:\n%s", out)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range paths {
		key := "github.com/" + p
		if parent := c.nets.Parent(repokey.Key(key)); parent != "" {
			t.Errorf("%s has the parent %q, of the forge's making", key, parent)
		}
	}
	c.engine.Each(func(k repokey.Key, _, _ uint32, _ bool) {
		if strings.Contains(k.String(), token) || strings.Contains(k.String(), "..") {
			t.Errorf("the fleet holds the key %q", k)
		}
	})
}

// syncBuf is a bytes.Buffer that several goroutines may write.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
