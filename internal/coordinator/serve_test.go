package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/store"
)

// unwritable is the embedded store on a full disk: it reads, and every
// batch of writes fails. tried is closed at the first one.
type unwritable struct {
	store.Store
	once  sync.Once
	tried chan struct{}
}

func (s *unwritable) Batch(context.Context, []store.Op) error {
	s.once.Do(func() { close(s.tried) })
	return fmt.Errorf("write the batch: %w", syscall.ENOSPC)
}

// The state a coordinator could not store on its way out is not lost in
// silence: Serve returns the last persist's error.
func TestServeReturnsTheErrorOfTheLastPersist(t *testing.T) {
	dir, catDir := t.TempDir(), t.TempDir()
	if err := gittest.Git(catDir, "init", "-q", "-b", "main"); err != nil {
		t.Fatal(err)
	}
	writeCatalog(t, catDir, []string{"example.org/g/a", "example.org/g/b"})
	db, err := store.OpenBolt(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	s := &unwritable{Store: db, tried: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{DataDir: dir, Catalog: catDir, JoinToken: testJoin, FullToken: testFull, Store: s},
			slog.New(slog.DiscardHandler), ln)
	}()
	select {
	case <-s.tried: // the catalog was applied, and its persist failed
	case err := <-done:
		t.Fatalf("Serve returned before it stored anything: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Serve returned %v, want the last persist's error", err)
	}
}
