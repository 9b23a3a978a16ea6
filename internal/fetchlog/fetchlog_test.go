package fetchlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/store"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func open(t *testing.T, path string, cfg Config, clk clock.Clock) (*Log, *store.Bolt) {
	t.Helper()
	db, err := store.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	return New(db, cfg, clk, slog.New(slog.NewTextHandler(io.Discard, nil))), db
}

func list(t *testing.T, l *Log, q Query) ([]Entry, string) {
	t.Helper()
	es, next, err := l.List(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return es, next
}

func ats(es []Entry) []int {
	var out []int
	for _, e := range es {
		out = append(out, int(e.At.Sub(t0)/time.Minute))
	}
	return out
}

func TestEntriesComeBackNewestFirstAndOutlastAReopen(t *testing.T) {
	clk := clock.NewFake(t0)
	path := filepath.Join(t.TempDir(), "node.db")
	l, db := open(t, path, Config{}, clk)
	for i := range 5 {
		l.Append(Entry{Key: "github.com/a/b", At: t0.Add(time.Duration(i) * time.Minute), Kind: "check", Node: 2, DurationMs: int64(i)})
	}
	l.Append(Entry{Key: "github.com/a/c", At: t0.Add(10 * time.Minute), Kind: "fetch", Result: ResultFailed, Error: "boom", ErrorClass: "timeout"})
	before, _ := list(t, l, Query{Key: "github.com/a/b"})
	if got := ats(before); !slices.Equal(got, []int{4, 3, 2, 1, 0}) {
		t.Fatalf("entries at minutes %v, want 4..0", got)
	}
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.Close()

	l, db = open(t, path, Config{}, clk)
	defer db.Close()
	after, _ := list(t, l, Query{Key: "github.com/a/b"})
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("after a reopen:\n%v\nbefore:\n%v", after, before)
	}
	all, _ := list(t, l, Query{})
	if got := ats(all); !slices.Equal(got, []int{10, 4, 3, 2, 1, 0}) {
		t.Errorf("all entries at minutes %v", got)
	}
	failed, _ := list(t, l, Query{Failed: true})
	if len(failed) != 1 || failed[0].Key != "github.com/a/c" || failed[0].Error != "boom" {
		t.Errorf("failed entries %+v", failed)
	}
}

func TestPagesFollowTheCursorAndStopAtSince(t *testing.T) {
	clk := clock.NewFake(t0)
	l, db := open(t, filepath.Join(t.TempDir(), "node.db"), Config{}, clk)
	defer db.Close()
	for i := range 10 {
		l.Append(Entry{Key: fmt.Sprintf("h/r/%d", i%3), At: t0.Add(time.Duration(i) * time.Minute), Node: uint32(1 + i%2)})
	}
	var got []int
	cursor := ""
	for pages := 0; ; pages++ {
		es, next := list(t, l, Query{Limit: 3, Before: cursor})
		got = append(got, ats(es)...)
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("the pages never end")
		}
		cursor = next
	}
	if !slices.Equal(got, []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}) {
		t.Errorf("paged entries at minutes %v", got)
	}
	es, _ := list(t, l, Query{Since: t0.Add(6 * time.Minute), Node: 2})
	if got := ats(es); !slices.Equal(got, []int{9, 7}) {
		t.Errorf("node 2 since minute 6: minutes %v, want 9 7", got)
	}
	es, _ = list(t, l, Query{Since: t0.Add(6 * time.Minute), Key: "h/r/0"})
	if got := ats(es); !slices.Equal(got, []int{9, 6}) {
		t.Errorf("h/r/0 since minute 6: minutes %v, want 9 6", got)
	}
}

func TestARepositoryKeepsItsNewestEntriesOnly(t *testing.T) {
	clk := clock.NewFake(t0)
	l, db := open(t, filepath.Join(t.TempDir(), "node.db"), Config{PerRepo: 10}, clk)
	defer db.Close()
	for i := range 50 {
		l.Append(Entry{Key: "h/a", At: t0.Add(time.Duration(i) * time.Minute)})
		l.Append(Entry{Key: "h/b", At: t0.Add(time.Duration(i) * time.Minute), Result: ResultFailed})
		if i%7 == 0 {
			if err := l.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	es, _ := list(t, l, Query{Key: "h/a"})
	if got := ats(es); !slices.Equal(got, []int{49, 48, 47, 46, 45, 44, 43, 42, 41, 40}) {
		t.Errorf("h/a keeps minutes %v, want the newest 10", got)
	}
	// What is stored stays within the bound and its slack, in every index.
	for _, b := range []string{bucketByRepo, bucketByTime, bucketFailures} {
		n := 0
		_ = db.Scan(context.Background(), b, "", func(string, []byte) error { n++; return nil })
		limit := 2 * 11
		if b == bucketFailures {
			limit = 11
		}
		if n > limit {
			t.Errorf("bucket %s holds %d entries, want at most %d", b, n, limit)
		}
	}
}

func TestEntriesPastTheirAgeAreDropped(t *testing.T) {
	clk := clock.NewFake(t0)
	l, db := open(t, filepath.Join(t.TempDir(), "node.db"), Config{MaxAge: time.Hour}, clk)
	defer db.Close()
	for i := range 3000 {
		l.Append(Entry{Key: fmt.Sprintf("h/r/%d", i%500), At: t0.Add(time.Duration(i) * time.Second), Result: ResultFailed})
	}
	clk.Set(t0.Add(time.Hour + 2000*time.Second))
	if err := l.Expire(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, q := range []Query{{}, {Failed: true}, {Key: "h/r/7"}} {
		es, _ := list(t, l, q)
		for _, e := range es {
			if e.At.Before(t0.Add(2000 * time.Second)) {
				t.Fatalf("query %+v: an entry of %v is past its age", q, e.At)
			}
		}
		if len(es) == 0 {
			t.Errorf("query %+v: the recent entries are gone too", q)
		}
	}
	n := 0
	_ = db.Scan(context.Background(), bucketByRepo, "", func(string, []byte) error { n++; return nil })
	if n != 1000 {
		t.Errorf("%d entries stored by repository, want the 1000 of the last hour", n)
	}
}

// failingDB fails its next fail batches, as a full disk would.
type failingDB struct {
	DB
	fail int
}

func (d *failingDB) Batch(ctx context.Context, ops []store.Op) error {
	if d.fail > 0 {
		d.fail--
		return errors.New("no space left on device")
	}
	return d.DB.Batch(ctx, ops)
}

// Found in review: a flush that failed (a full disk, or a reader that went
// away while its listing flushed) lost its entries. They are kept for the
// next flush, and a reader going away does not cut the write short.
func TestAFailedFlushLosesNothing(t *testing.T) {
	clk := clock.NewFake(t0)
	bolt, err := store.OpenBolt(filepath.Join(t.TempDir(), "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	db := &failingDB{DB: bolt, fail: 1}
	l := New(db, Config{}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range 3 {
		l.Append(Entry{Key: "h/a", At: t0.Add(time.Duration(i) * time.Minute)})
	}
	if err := l.Flush(context.Background()); err == nil {
		t.Fatal("the first flush did not fail: the test proves nothing")
	}
	l.Append(Entry{Key: "h/a", At: t0.Add(3 * time.Minute)})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Flush(gone); err != nil {
		t.Fatalf("a flush for a reader that went away: %v", err)
	}
	es, _ := list(t, l, Query{Key: "h/a"})
	if got := ats(es); !slices.Equal(got, []int{3, 2, 1, 0}) {
		t.Fatalf("entries at minutes %v, want all four", got)
	}
}

func TestRewritesKeepTheirOldAndNewIDsThroughTheStore(t *testing.T) {
	clk := clock.NewFake(t0)
	l, _ := open(t, filepath.Join(t.TempDir(), "node.db"), Config{}, clk)
	var rw []Rewrite
	for i := range MaxRewrites + 3 {
		rw = append(rw, Rewrite{Ref: fmt.Sprintf("refs/tags/v%03d", i), Old: fmt.Sprintf("%040x", i+1)})
	}
	rw[0].New = fmt.Sprintf("%040x", 999) // a force-push: old and new
	l.Append(Entry{Key: "github.com/a/b", At: t0, Kind: "fetch", Rewrites: rw})
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	es, _ := list(t, l, Query{Key: "github.com/a/b"})
	if len(es) != 1 {
		t.Fatalf("%d entries", len(es))
	}
	got := es[0]
	if len(got.Rewrites) != MaxRewrites || got.RewritesOmitted != 3 || got.Rewrites[0] != rw[0] || got.Rewrites[MaxRewrites-1] != rw[MaxRewrites-1] {
		t.Fatalf("rewrites %d (omitted %d), first %+v; want %d, 3 omitted, first %+v", len(got.Rewrites), got.RewritesOmitted, got.Rewrites[0], MaxRewrites, rw[0])
	}
}
