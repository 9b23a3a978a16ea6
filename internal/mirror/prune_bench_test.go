package mirror_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// BenchmarkPrune measures one pruning (git repack -a -d -b, git prune
// --expire=now) of a medium mirror (2,000 commits over 5,000 files, about
// 49,000 objects) after its upstream force-pushed a commit away. Only the
// pruning is timed: the commit, the two syncs that mark the mirror, not.
func BenchmarkPrune(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	st, err := mirror.Open(b.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	st.SetPruneAfter(0)
	ctx := context.Background()
	name := synthRepo(b, up, "medium", 2000, 5000, 10)
	bare := filepath.Join(up.Dir, name+".git")
	url := up.RepoURL(name)
	key := repokey.Key(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), ".git"))
	if _, err := st.Sync(ctx, key, url); err != nil {
		b.Fatal(err)
	}
	tip, err := gittest.Output("", "--git-dir="+bare, "rev-parse", "refs/heads/main")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := up.AddBlob(name, "main", 4096); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Sync(ctx, key, url); err != nil {
			b.Fatal(err)
		}
		if err := gittest.Git("", "--git-dir="+bare, "update-ref", "refs/heads/main", strings.TrimSpace(tip)); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Sync(ctx, key, url); err != nil {
			b.Fatal(err)
		}
		if len(st.PrunePending()) != 1 {
			b.Fatal("the force-push did not mark the mirror")
		}
		b.StartTimer()
		if n := st.PruneDue(ctx); n != 1 {
			b.Fatalf("pruned %d, want 1", n)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/prune")
}
