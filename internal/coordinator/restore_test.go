package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/store"
)

// unreadable is the embedded store with one key that cannot be read, as
// when an etcd read times out; every other call goes to the store.
type unreadable struct {
	store.Store
	bucket, key string
}

func (s unreadable) Get(ctx context.Context, bucket, key string) ([]byte, bool, error) {
	if bucket == s.bucket && key == s.key {
		return nil, false, fmt.Errorf("read %s/%s: %w", bucket, key, context.DeadlineExceeded)
	}
	return s.Store.Get(ctx, bucket, key)
}

// writeCatalog commits a catalog of the given repositories, one list file.
func writeCatalog(t *testing.T, dir string, keys []string) {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "https://%s\n", k)
	}
	if err := os.WriteFile(filepath.Join(dir, "repos.list"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "repos.list"}, {"commit", "-q", "-m", fmt.Sprintf("%d repositories", len(keys))}} {
		if err := gittest.Git(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// A coordinator whose store fails to read the removals that purge
// protection holds (or any other part of its stored state) does not start:
// taking the failed read for "nothing stored" would apply removals that no
// operator confirmed. Once the store reads again, they are still held.
func TestARestoreThatCannotReadItsStateFailsAndThePurgeStaysHeld(t *testing.T) {
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
	dbPath := filepath.Join(dir, "state.db")
	open := func(wrap func(store.Store) store.Store) (*Coordinator, error) {
		t.Helper()
		db, err := store.OpenBolt(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		// New closes the store when it fails, and Close when it does not.
		return New(ctx, Config{DataDir: dir, Catalog: catDir, JoinToken: testJoin, FullToken: testFull, Store: wrap(db)},
			slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1.7e9, 0)))
	}
	readable := func(s store.Store) store.Store { return s }

	c, err := open(readable)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	writeCatalog(t, catDir, keys[10:]) // a quarter removed: over the 5% allowed
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	p := c.pendingPurge()
	c.mu.Unlock()
	if p == nil || p.removed != 10 {
		t.Fatalf("held after the catalog change: %+v, want 10 removals", p)
	}
	if err := c.persist(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()

	for _, key := range []string{metaHeld, metaRemoval, "membership", "catalog_commit", "placement"} {
		c, err := open(func(s store.Store) store.Store { return unreadable{Store: s, bucket: bucketMeta, key: key} })
		if err == nil {
			c.Close()
			t.Errorf("the coordinator started although %s could not be read", key)
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s unreadable: %v, want the read's error, naming the key", key, err)
		}
	}

	c, err = open(readable)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.mu.Lock()
	p = c.pendingPurge()
	c.mu.Unlock()
	if p == nil || p.removed != 10 || p.keys[0] != keys[0] {
		t.Fatalf("held after the failed restores: %+v, want the same 10 removals", p)
	}
}
