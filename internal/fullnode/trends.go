package fullnode

import (
	"context"
	"time"

	"github.com/gitfleet/gitfleet/internal/repoview"
	"github.com/gitfleet/gitfleet/internal/series"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// The full node's figures over time (package series), which its console
// draws: the fleet's checks, fetches and failures as the coordinator's
// states tell them, the bytes of git served to the public, and a sample a
// minute of the disk used and of the share of repositories current. The
// buckets that changed are stored every minute, so that a restarted node
// draws the last day and week at once.

// bucketSeries holds the stored buckets (series.Stored).
const bucketSeries = "console-series"

// seriesEvery is how often the gauges are sampled and the buckets stored;
// seriesFirst when they are first, once the coordinator has sent states.
const (
	seriesEvery = time.Minute
	seriesFirst = 10 * time.Second
)

// stateCounts is what a repository's new state r, after old, tells of the
// checks, fetches and failures made since.
func stateCounts(old repoview.Entry, r *fleetv1.RepoState) series.Counts {
	var c series.Counts
	if n := r.GetChecks(); n > uint64(old.Checks()) {
		c.Checks = n - uint64(old.Checks())
	}
	if n := r.GetFetches(); n > uint64(old.Fetches()) {
		c.Fetches = n - uint64(old.Fetches())
	}
	if r.GetLastCheckMs() > old.LastCheck() && r.GetLastError() != "" {
		// The checks since the last state all failed, as far as the
		// full node can tell: at least the last did.
		c.Failures = max(c.Checks, 1)
	}
	return c
}

// countServed returns a counter of the bytes of git served to the public
// that also counts them in the series, and in next.
func (f *Node) countServed(next func(int)) func(int) {
	return func(n int) {
		next(n)
		if n > 0 {
			f.series.Count(f.clk.Now(), series.Counts{ServedBytes: uint64(n)})
		}
	}
}

// sampleSeries records how the disk and the freshness stand now.
func (f *Node) sampleSeries() {
	used, _ := f.n.Disk()
	t := f.totals()
	f.series.Sample(f.clk.Now(), series.Gauges{DiskUsed: used, Current: uint64(t.current), Total: uint64(t.total)})
}

// seriesLoop samples the gauges and stores the changed buckets
// seriesFirst after the start, then every seriesEvery, and stores them
// once more when ctx ends.
func (f *Node) seriesLoop(ctx context.Context) {
	next := f.clk.NewTimer(seriesFirst)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			f.storeSeries(context.Background())
			return
		case <-next.C():
			f.sampleSeries()
			f.storeSeries(ctx)
			next.Reset(seriesEvery)
		}
	}
}

// storeSeries writes the buckets that changed, with those a failed write
// left, in one transaction.
func (f *Node) storeSeries(ctx context.Context) {
	changed := f.series.Changed()
	f.seriesMu.Lock()
	defer f.seriesMu.Unlock()
	pending := append(f.seriesUnstored, changed...) // later ones win in a batch
	if len(pending) == 0 {
		return
	}
	ops := make([]store.Op, len(pending))
	for i, s := range pending {
		ops[i] = store.Op{Bucket: bucketSeries, Key: s.Key, Value: s.Value}
	}
	if err := f.db.Batch(ctx, ops); err != nil {
		f.log.Warn("store the console's series; will retry", "buckets", len(ops), "err", err)
		f.seriesUnstored = dedupStored(pending)
		return
	}
	f.seriesUnstored = nil
}

// dedupStored keeps the last of each key of s: the buckets a failed write
// left stay as many as a series holds.
func dedupStored(s []series.Stored) []series.Stored {
	at := make(map[string]int, len(s))
	out := s[:0]
	for _, x := range s {
		if i, ok := at[x.Key]; ok {
			out[i] = x
			continue
		}
		at[x.Key] = len(out)
		out = append(out, x)
	}
	return out
}

// loadSeries reads the stored buckets back; one it cannot read is
// skipped.
func (f *Node) loadSeries(ctx context.Context) error {
	return f.db.Scan(ctx, bucketSeries, "", func(k string, v []byte) error {
		if err := f.series.Restore(k, v); err != nil {
			f.log.Warn("the console's series: a stored bucket skipped", "bucket", k, "err", err)
		}
		return nil
	})
}
