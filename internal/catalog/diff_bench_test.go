package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkDiff is `gitfleet catalog diff` of a change of 100 entries in
// 10 files, against a full load of the old catalog then an update (what
// the command did before), timed in the same run.
//
//	go test -run='^$' -bench=Diff -benchtime=5x ./internal/catalog/
func BenchmarkDiff(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			gitDir, base := benchCatalog(b, n, 1000)
			next := benchChange(b, gitDir, base, n, 1000)
			var r DiffResult
			var err error
			for b.Loop() {
				if r, err = Diff(ctx, testGit, gitDir, base, next, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			d := r.Delta
			if len(d.Added) != 50 || len(d.Removed) != 50 || len(d.Changed) != 0 || r.Whole {
				b.Fatalf("delta: %d added, %d removed, %d changed (whole %v); want 50, 50, 0", len(d.Added), len(d.Removed), len(d.Changed), r.Whole)
			}
			perDiff := b.Elapsed() / time.Duration(b.N)
			full := time.Duration(1<<63 - 1)
			for range 3 {
				start := time.Now()
				old, err := Load(ctx, testGit, gitDir, base, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := old.Update(ctx, testGit, gitDir, next); err != nil {
					b.Fatal(err)
				}
				full = min(full, time.Since(start))
			}
			b.ReportMetric(float64(r.FilesRead), "blobs-read")
			b.ReportMetric(full.Seconds()*1000, "full-load-ms")
			b.ReportMetric(perDiff.Seconds()/full.Seconds(), "x-full-load")
		})
	}
}
