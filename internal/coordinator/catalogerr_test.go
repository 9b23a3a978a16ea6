package coordinator

import (
	"context"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gittest"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A catalog that cannot be read is an error, with the time the failures
// began, not an empty healthy catalog; once read, the error is gone; a
// later failure keeps the last good commit.
func TestAnUnreadableCatalogIsAnErrorUntilItIsRead(t *testing.T) {
	dir := t.TempDir()
	catalogDir := filepath.Join(t.TempDir(), "catalog")
	clk := clock.NewFake(time.Unix(1.7e9, 0))
	c, err := New(context.Background(), Config{DataDir: dir, Catalog: catalogDir, JoinToken: testJoin, FullToken: testFull},
		slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	full := as(mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"}))
	status := func() *fleetv1.CatalogStatusResponse {
		t.Helper()
		st, err := c.CatalogStatus(full, &fleetv1.CatalogStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	began := clk.Now()
	if err := c.RefreshCatalog(context.Background()); err == nil {
		t.Fatal("a catalog path that does not exist was read")
	}
	st := status()
	if !strings.Contains(st.GetError(), catalogDir) || st.GetErrorAtMs() != began.UnixMilli() || st.GetCommit() != "" || st.GetRepos() != 0 {
		t.Fatalf("a missing catalog: %v", st)
	}
	if c := repostate.ClassFromWire(st.GetErrorClass()); c != repostate.ClassNotFound {
		t.Errorf("a missing catalog's class is %q, want %q", c, repostate.ClassNotFound)
	}
	clk.Advance(time.Minute)
	if err := c.RefreshCatalog(context.Background()); err == nil {
		t.Fatal("a catalog path that does not exist was read")
	}
	if st := status(); st.GetErrorAtMs() != began.UnixMilli() {
		t.Errorf("a second failure moved the time the failures began: %v", st)
	}

	if err := gittest.Git("", "init", "-q", "-b", "main", catalogDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(catalogDir, "a.list"), []byte("https://example.org/a/b.git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "one repository"}} {
		if err := gittest.Git(catalogDir, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.RefreshCatalog(context.Background()); err != nil {
		t.Fatalf("the catalog once it exists: %v", err)
	}
	st = status()
	if st.GetError() != "" || st.GetErrorAtMs() != 0 || st.GetErrorClass() != 0 || st.GetCommit() == "" || st.GetRepos() != 1 {
		t.Fatalf("a catalog read: %v", st)
	}
	good := st.GetCommit()

	if err := os.RemoveAll(catalogDir); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if err := c.RefreshCatalog(context.Background()); err == nil {
		t.Fatal("a vanished catalog was read")
	}
	st = status()
	if st.GetError() == "" || st.GetErrorAtMs() != clk.Now().UnixMilli() || st.GetCommit() != good || st.GetRepos() != 1 {
		t.Errorf("a catalog gone after one was read: %v; want the error and the last good commit %s", st, good)
	}
}
