package coordinator

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gittest"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// The catalog's status says where it comes from, when it was last fetched
// and what that fetch found wrong (since the first failure in a row), and
// when the next fetch is planned.
func TestCatalogStatusTellsTheFetchesAndTheirError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	catDir := filepath.Join(dir, "catalog")
	clk := clock.NewFake(time.Unix(1.7e9, 0))
	c, err := New(ctx, Config{DataDir: dir, Catalog: catDir, JoinToken: testJoin, FullToken: testFull, CatalogInterval: time.Hour},
		slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	status := func() *fleetv1.CatalogStatusResponse {
		t.Helper()
		st, err := c.CatalogStatus(as(full), &fleetv1.CatalogStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st.GetUrl() != catDir || st.GetLastFetchMs() != 0 || st.GetNextFetchMs() != 0 || st.GetError() != "" {
		t.Errorf("before any fetch: %v", st)
	}

	// The catalog is not there: the fetch's error, since its time.
	first := clk.Now()
	if err := c.RefreshCatalog(ctx); err == nil {
		t.Fatal("a catalog that does not exist was fetched")
	}
	clk.Advance(time.Minute)
	if err := c.RefreshCatalog(ctx); err == nil {
		t.Fatal("a catalog that does not exist was fetched")
	}
	st := status()
	if st.GetError() == "" || st.GetErrorAtMs() != first.UnixMilli() || st.GetLastFetchMs() != clk.Now().UnixMilli() {
		t.Errorf("after two failed fetches: error %q at %d, last fetch %d; want the error since %d, the last fetch at %d",
			st.GetError(), st.GetErrorAtMs(), st.GetLastFetchMs(), first.UnixMilli(), clk.Now().UnixMilli())
	}

	// It comes: the error is gone, and the loop plans the next fetch.
	if err := gittest.Git(dir, "init", "-q", "-b", "main", catDir); err != nil {
		t.Fatal(err)
	}
	writeCatalog(t, catDir, []string{"example.org/a/b"})
	clk.Advance(time.Minute)
	loop := make(chan struct{})
	go func() { defer close(loop); c.catalogLoop(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for st = status(); st.GetNextFetchMs() == 0; st = status() {
		if time.Now().After(deadline) {
			t.Fatalf("the catalog loop planned no next fetch: %v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-loop
	if st.GetError() != "" || st.GetErrorAtMs() != 0 || st.GetLastFetchMs() != clk.Now().UnixMilli() ||
		st.GetNextFetchMs() != clk.Now().Add(time.Hour).UnixMilli() || st.GetRepos() != 1 {
		t.Errorf("after a good fetch: %v; want no error, the fetch now and the next in an hour", st)
	}
}

// The catalog's URL is shown without the credentials it may carry.
func TestCatalogStatusRedactsTheCatalogsCredentials(t *testing.T) {
	dir := t.TempDir()
	c, err := New(context.Background(), Config{DataDir: dir, Catalog: "https://someone:s3cret@git.example.org/catalog.git",
		JoinToken: testJoin, FullToken: testFull}, slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1.7e9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	st, err := c.CatalogStatus(as(full), &fleetv1.CatalogStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(st.GetUrl(), "s3cret") || !strings.Contains(st.GetUrl(), "git.example.org/catalog.git") {
		t.Errorf("the catalog's URL: %q", st.GetUrl())
	}
}
