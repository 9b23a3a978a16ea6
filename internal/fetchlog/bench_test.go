package fetchlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/store"
)

// filledLog returns a log of n entries over repos repositories, one in 20
// failed, a second apart.
func filledLog(b *testing.B, n, repos int) *Log {
	b.Helper()
	db, err := store.OpenBolt(filepath.Join(b.TempDir(), "node.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	l := New(db, Config{PerRepo: 100, MaxAge: 365 * 24 * time.Hour}, clock.NewFake(t0.Add(time.Duration(n)*time.Second)),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range n {
		e := Entry{Key: fmt.Sprintf("github.com/g%d/r%d", i%repos/100, i%repos), At: t0.Add(time.Duration(i) * time.Second),
			Kind: "check", Node: uint32(1 + i%7), DurationMs: 120}
		if i%20 == 0 {
			e.Result, e.Error, e.ErrorClass = ResultFailed, "git ls-remote: network: connection refused", "upstream unreachable"
		}
		l.Append(e)
	}
	if err := l.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkListPage reads a page of 100 entries of the newest failures,
// of one repository, and of the whole log from an hour back, in logs of
// growing size: a page costs what it holds, so the time stays flat.
//
//	go test ./internal/fetchlog -run '^$' -bench ListPage
func BenchmarkListPage(b *testing.B) {
	for _, n := range benchsize.Of([]int{10_000, 100_000, 400_000}, []int{1000}) {
		l := filledLog(b, n, n/10)
		end := t0.Add(time.Duration(n) * time.Second)
		for _, q := range []struct {
			name string
			q    Query
		}{
			{"failed", Query{Failed: true, Limit: 100}},
			{"repo", Query{Key: "github.com/g0/r7", Limit: 100}},
			{"since-1h", Query{Since: end.Add(-time.Hour), Limit: 100}},
		} {
			b.Run(fmt.Sprintf("entries=%d/%s", n, q.name), func(b *testing.B) {
				var es []Entry
				for b.Loop() {
					var err error
					if es, _, err = l.List(context.Background(), q.q); err != nil {
						b.Fatal(err)
					}
				}
				if len(es) == 0 {
					b.Fatal("an empty page")
				}
				b.ReportMetric(float64(len(es)), "entries/page")
			})
		}
	}
}

// BenchmarkFlush writes 1,000 new entries, one for each of 1,000
// repositories already at their bound of 100 (so that writes also trim),
// in one transaction.
//
//	go test ./internal/fetchlog -run '^$' -bench Flush
func BenchmarkFlush(b *testing.B) {
	l := filledLog(b, benchsize.Of(100_000, 1000), 1000)
	i := 0
	for b.Loop() {
		for range 1000 {
			l.Append(Entry{Key: fmt.Sprintf("github.com/g%d/r%d", i%1000/100, i%1000), At: t0.Add(time.Duration(200_000+i) * time.Second)})
			i++
		}
		if err := l.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(i), "µs/entry")
}
