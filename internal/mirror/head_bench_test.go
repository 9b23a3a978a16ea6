package mirror_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// BenchmarkHeadAsk measures what following the upstream's HEAD costs a
// quiet check (no ref moved), in HTTP requests to the upstream (the test
// server's counter), at steady state: a node asks HEAD once per half
// --max-interval (WithHeadRecheck), so a repository checked every
// --max-interval asks at every check, and one checked more often asks
// less often per check. Each sub-benchmark checks one repository at an
// interval of the --max-interval (24 h) on the fake clock; requests/check
// is the figure (2 is a ref listing alone: the advertisement and
// ls-refs, what every quiet check cost before, HEAD being asked only
// beside a fetch).
func BenchmarkHeadAsk(b *testing.B) {
	const maxInterval = 24 * time.Hour
	for _, every := range []time.Duration{maxInterval, maxInterval / 4, maxInterval / 24, maxInterval / 96} {
		b.Run(fmt.Sprintf("every=%v", every), func(b *testing.B) {
			up, err := gittest.Start(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(up.Close)
			if err := up.Create("h", []string{"main", "dev"}, nil); err != nil {
				b.Fatal(err)
			}
			clk := clock.NewFake(time.Now())
			st, err := mirror.Open(b.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.DiscardHandler),
				mirror.WithClock(clk), mirror.WithHeadRecheck(maxInterval/2))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			ctx := context.Background()
			url := up.RepoURL("h")
			key := keyOf(b, url)
			if _, err := st.Sync(ctx, key, url); err != nil {
				b.Fatal(err)
			}
			// Steady state: past the clone's ask.
			for range 4 {
				clk.Advance(every)
				if _, err := st.Sync(ctx, key, url); err != nil {
					b.Fatal(err)
				}
			}
			before := up.Requests("h")
			b.ResetTimer()
			for b.Loop() {
				clk.Advance(every)
				if _, err := st.Sync(ctx, key, url); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(up.Requests("h")-before)/float64(b.N), "requests/check")
		})
	}
}
