package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gittest"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// removedSent returns the keys of the RepoRemoved messages s sends next.
func removedSent(s *session) []string {
	var keys []string
	for _, m := range s.next() {
		keys = append(keys, m.GetRepoRemoved().GetKeys()...)
	}
	slices.Sort(keys)
	return keys
}

// A repository removed from the catalog while the full node was away (its
// RepoRemoved went to no session) is removed when the full node comes back
// and says what it holds, and only once the catalog is known: a full node
// that reconnects before then is told nothing, so that a catalog not read
// yet removes nothing. (The soak found a removed repository still served
// after the full node's session was cut during the removal.)
func TestAFullNodeBackFromAwayIsToldOfTheRemovalsItMissed(t *testing.T) {
	ctx := context.Background()
	dir, catDir := t.TempDir(), t.TempDir()
	if err := gittest.Git(catDir, "init", "-q", "-b", "main"); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 40 {
		keys = append(keys, fmt.Sprintf("example.org/g/r%02d", i))
	}
	writeCatalog(t, catDir, keys)
	c, err := New(ctx, Config{DataDir: dir, Catalog: catDir, JoinToken: testJoin, FullToken: testFull},
		slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1.7e9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	held := func() *fleetv1.Inventory {
		inv := &fleetv1.Inventory{Done: true}
		for _, k := range keys {
			inv.Repos = append(inv.Repos, &fleetv1.HeldRepo{Key: k})
		}
		return inv
	}

	// Before the catalog is read, the full node's inventory waits.
	c.mu.Lock()
	if c.cat != nil {
		t.Fatal("the catalog is read before RefreshCatalog: the test's first part tests nothing")
	}
	s := connect(c, full)
	c.inventory(full.GetNodeId(), s, held())
	if got := removedSent(s); len(got) != 0 {
		t.Fatalf("removals sent before the catalog was read: %v", got)
	}
	c.mu.Unlock()
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	if got := removedSent(s); len(got) != 0 {
		t.Fatalf("removals sent although the full node holds only the catalog's keys: %v", got)
	}
	// The full node goes away; one repository leaves the catalog meanwhile.
	delete(c.sessions, full.GetNodeId())
	c.mu.Unlock()
	writeCatalog(t, catDir, keys[1:])
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s = connect(c, full)
	c.inventory(full.GetNodeId(), s, held())
	if got := removedSent(s); !slices.Equal(got, keys[:1]) {
		t.Fatalf("after the full node came back, removals sent %v, want %v", got, keys[:1])
	}
}
