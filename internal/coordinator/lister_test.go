package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// ownerForge answers GitHub's GraphQL listing of an owner's repositories
// (one page) with the names it is given, or 502 while failing.
type ownerForge struct {
	mu       sync.Mutex
	repos    []string
	failing  bool
	requests atomic.Int64
}

func (o *ownerForge) set(failing bool, repos ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failing, o.repos = failing, repos
}

func (o *ownerForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.requests.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failing {
		http.Error(w, `{"message":"Server Error"}`, http.StatusBadGateway)
		return
	}
	var nodes []any
	for _, n := range o.repos {
		nodes = append(nodes, map[string]any{"nameWithOwner": n, "databaseId": 1, "isFork": false, "isArchived": false, "diskUsage": 1,
			"repositoryTopics": map[string]any{"nodes": []any{}}})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{
		"rateLimit":       map[string]any{"cost": 1, "remaining": 4999, "limit": 5000, "resetAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		"repositoryOwner": map[string]any{"repositories": map[string]any{"pageInfo": map[string]any{"hasNextPage": false, "endCursor": nil}, "nodes": nodes}}}})
}

// A lister's listing becomes catalog entries with their provenance; a
// failed listing keeps the last good one; a listing that drops most of
// them is held by purge protection; and a restart keeps both the listing
// and its time, so that it neither drops the repositories nor lists
// again before --lister-interval.
func TestAListersLastGoodListingIsKeptHeldAndStored(t *testing.T) {
	of := &ownerForge{}
	of.set(false, "acme/a", "acme/b", "acme/c")
	srv := httptest.NewServer(of)
	t.Cleanup(srv.Close)
	api, err := url.Parse(srv.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cat := filepath.Join(dir, "catalog")
	if err := os.MkdirAll(cat, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cat, "orgs.list"), []byte("https://github.com/acme/*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "acme"}} {
		if err := gittest.Git(cat, args...); err != nil {
			t.Fatal(err)
		}
	}
	clk := clock.NewFake(time.Unix(1.7e9, 0))
	cfg := Config{DataDir: filepath.Join(dir, "data"), Catalog: cat, JoinToken: testJoin, FullToken: testFull,
		Feeds: FeedConfig{Forges: forge.Config{
			Forges: map[string]forge.Forge{"github.com": {Host: "github.com", Kind: forge.GitHub, API: api}},
			Tokens: map[string][]forge.Token{"github.com": {forge.NewToken("feed-token")}}}}}
	ctx := context.Background()
	start := func() *Coordinator {
		t.Helper()
		c, err := New(ctx, cfg, slog.New(slog.DiscardHandler), clk)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RefreshCatalog(ctx); err != nil {
			t.Fatal(err)
		}
		if len(c.startFeeds()) != 1 {
			t.Fatal("no feed for github.com")
		}
		return c
	}
	keys := func(c *Coordinator) []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []string
		for _, k := range c.effectiveKeys() {
			if c.engine.Has(k) {
				out = append(out, k.String())
			}
		}
		slices.Sort(out)
		return out
	}
	all := []string{"github.com/acme/a", "github.com/acme/b", "github.com/acme/c"}

	c := start()
	c.listDue(ctx)
	if got := keys(c); !slices.Equal(got, all) {
		t.Fatalf("placed %v, want %v", got, all)
	}
	c.mu.Lock()
	e, _ := c.entry("github.com/acme/b")
	c.mu.Unlock()
	if e.Attrs[catalog.AttrLister] != "https://github.com/acme/*" {
		t.Fatalf("entry %+v has no provenance", e)
	}

	// A failing forge changes nothing.
	of.set(true)
	clk.Advance(7 * time.Hour)
	c.listDue(ctx)
	if got := keys(c); !slices.Equal(got, all) {
		t.Fatalf("after a failed listing, placed %v, want %v", got, all)
	}

	// A listing that drops two of three is held.
	of.set(false, "acme/a")
	clk.Advance(7 * time.Hour)
	c.listDue(ctx)
	c.mu.Lock()
	held := len(c.held)
	c.mu.Unlock()
	if got := keys(c); !slices.Equal(got, all) || held != 2 {
		t.Fatalf("after a listing that dropped two, placed %v and %d held; want all three, two held", got, held)
	}
	if err := c.persist(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()

	// A restart: the listing and the held removals are back, and nothing
	// is asked of the forge before the interval.
	asked := of.requests.Load()
	c = start()
	t.Cleanup(func() { c.Close() })
	if next := c.listDue(ctx); !next.After(clk.Now()) {
		t.Fatalf("the next listing is due at %v, now is %v", next, clk.Now())
	}
	if got := keys(c); !slices.Equal(got, all) || of.requests.Load() != asked {
		t.Fatalf("after a restart, placed %v, %d more requests; want all three, none", got, of.requests.Load()-asked)
	}
	c.mu.Lock()
	e, ok := c.entry("github.com/acme/a")
	held = len(c.held)
	c.mu.Unlock()
	if !ok || e.Attrs[catalog.AttrLister] == "" || held != 2 {
		t.Fatalf("after a restart, acme/a is %+v (%v), %d held", e, ok, held)
	}
}
