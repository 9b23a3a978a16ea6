package mirror_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// BenchmarkPullSizeWatch is what --max-repo-size costs a full node's
// verified pull of a small update (one new commit on a branch of a mirror
// of about 2 MiB, the limit far away): two stores pull each update from the
// same source, one watched and one not, in turn, and the ratio of their
// times is reported. The watch measures the mirror once (a walk of its
// files) and the quarantine every 100 ms.
func BenchmarkPullSizeWatch(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	if err := up.Create("a", []string{"main", "dev"}, []string{"v1"}); err != nil {
		b.Fatal(err)
	}
	for range 8 {
		if _, err := up.AddBlob("a", "dev", 256<<10); err != nil {
			b.Fatal(err)
		}
	}
	url := up.RepoURL("a")
	key := keyOf(b, url)
	git := gitcmd.New(gitcmd.Direct(), gitcmd.Options{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	upstream := func(ctx context.Context, names []string) (gitcmd.Refs, error) {
		return git.LsRemoteRefs(ctx, url, names)
	}
	ctx := context.Background()
	var stores [2]*mirror.Store // plain, watched
	for i := range stores {
		if stores[i], err = mirror.Open(b.TempDir(), git, log); err != nil {
			b.Fatal(err)
		}
		if i == 1 {
			stores[i].SetLimits(mirror.Limits{MaxRepoSize: 10 << 30})
		}
		if _, err := stores[i].PullVerified(ctx, key, mirror.Source{URL: url}, upstream); err != nil {
			b.Fatal(err)
		}
	}
	var took [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := up.Commit("a", "main"); err != nil {
			b.Fatal(err)
		}
		for j := range 2 {
			k := (i + j) % 2 // each goes first in turn
			start := time.Now()
			res, err := stores[k].PullVerified(ctx, key, mirror.Source{URL: url}, upstream)
			took[k] += time.Since(start)
			if err != nil || !res.Changed {
				b.Fatalf("pull: %+v, %v", res, err)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0].Microseconds())/1000/n, "ms/pull")
	b.ReportMetric(float64(took[1].Microseconds())/1000/n, "ms/watched-pull")
	b.ReportMetric(float64(took[1])/float64(took[0]), "watched/plain")
}
