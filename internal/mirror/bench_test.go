package mirror_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// BenchmarkCloneSizeWatch is the cost of --max-repo-size on a normal clone
// (the limit far away): the same clone with and without the size watch,
// alternating in one run, and their ratio.
func BenchmarkCloneSizeWatch(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	if err := up.Create("repo", []string{"main", "dev"}, []string{"v1"}); err != nil {
		b.Fatal(err)
	}
	// 32 MiB in 64 commits of 512 KiB: a pack that takes a while to
	// arrive, many polls of the watch.
	for range benchsize.Of(64, 2) {
		if _, err := up.AddBlob("repo", "main", 512<<10); err != nil {
			b.Fatal(err)
		}
	}
	// Packed as a real host keeps it, so that serving is cheap and the
	// clone's own cost shows.
	if err := gittest.Git("", "--git-dir="+filepath.Join(up.Dir, "repo.git"), "repack", "-adq"); err != nil {
		b.Fatal(err)
	}
	url := up.RepoURL("repo")
	key := keyOf(b, url)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clone := func(l mirror.Limits) time.Duration {
		dir, err := os.MkdirTemp(b.TempDir(), "clone-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		st, err := mirror.Open(dir, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), log)
		if err != nil {
			b.Fatal(err)
		}
		st.SetLimits(l)
		start := time.Now()
		if _, err := st.Sync(context.Background(), key, url); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if _, err := os.Stat(filepath.Join(st.Path(key), "objects")); err != nil {
			b.Fatal(err)
		}
		return d
	}
	watched := mirror.Limits{MaxRepoSize: 10 << 30}
	clone(mirror.Limits{}) // warm the caches
	var plain, watch time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			plain += clone(mirror.Limits{})
			watch += clone(watched)
		} else {
			watch += clone(watched)
			plain += clone(mirror.Limits{})
		}
	}
	b.ReportMetric(float64(plain.Milliseconds())/float64(b.N), "ms/clone")
	b.ReportMetric(float64(watch.Milliseconds())/float64(b.N), "ms/watched-clone")
	b.ReportMetric(float64(watch)/float64(plain), "watched/plain")
}
