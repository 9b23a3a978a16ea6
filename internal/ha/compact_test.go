package ha

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/etcdtest"
)

// put writes key and returns the revision of the write.
func put(t *testing.T, client *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := client.Put(context.Background(), key, value)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// readAt reads key as of rev.
func readAt(client *clientv3.Client, key string, rev int64) error {
	_, err := client.Get(context.Background(), key, clientv3.WithRev(rev))
	return err
}

// Each step compacts to the revision the step before saw: the history
// before it is gone, the history since is kept.
func TestCompactKeepsOneIntervalOfHistory(t *testing.T) {
	etcd := etcdtest.Start(t)
	client := dialTest(t, etcd.Endpoint)
	_, s := leaderStore(t, client, "/c1")
	ctx := context.Background()

	r1 := put(t, client, "/c1/data/repos/k", "1")
	put(t, client, "/c1/data/repos/k", "2")
	seen, err := s.compact(ctx, 0) // the first step only looks
	if err != nil {
		t.Fatal(err)
	}
	if err := readAt(client, "/c1/data/repos/k", r1); err != nil {
		t.Fatalf("the first step compacted: %v", err)
	}
	r3 := put(t, client, "/c1/data/repos/k", "3")
	next, err := s.compact(ctx, seen)
	if err != nil {
		t.Fatal(err)
	}
	if next != r3 {
		t.Errorf("the next step would compact to %d, want %d (the current revision)", next, r3)
	}
	if err := readAt(client, "/c1/data/repos/k", r1); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("a revision before the one seen an interval ago: %v, want compacted", err)
	}
	if err := readAt(client, "/c1/data/repos/k", seen); err != nil {
		t.Errorf("the revision seen an interval ago: %v", err)
	}
	// etcd compacted further meanwhile (its own auto-compaction): no error.
	if _, err := client.Compact(ctx, r3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.compact(ctx, seen); err != nil {
		t.Errorf("a revision compacted already: %v", err)
	}
}

// The leader's loop compacts as its clock moves, and stops with its term.
func TestCompactHistoryRunsWhileTheTermLasts(t *testing.T) {
	etcd := etcdtest.Start(t)
	client := dialTest(t, etcd.Endpoint)
	term, _ := leaderStore(t, client, "/c2")
	clk := clock.NewFake(time.Unix(0, 0))
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		term.CompactHistory(context.Background(), clk, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	old := put(t, client, "/c2/data/repos/k", "1")
	put(t, client, "/c2/data/repos/k", "2")
	deadline := time.Now().Add(time.Minute)
	for readAt(client, "/c2/data/repos/k", old) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the history was not compacted in a minute of a clock moving a minute every 10 ms")
		}
		clk.Advance(time.Minute)
		time.Sleep(10 * time.Millisecond)
	}
	if err := term.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("CompactHistory still runs after the term ended")
	}
}
