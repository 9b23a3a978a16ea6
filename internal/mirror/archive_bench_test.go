package mirror_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// BenchmarkArchiveFetch measures a sync that fetches one moved branch of
// a repository with 2,000 branches, with the archive of rewritten history
// off and on: a force-push (the old tip is kept under refs/archive/) and a
// fast-forward (its archive ref is written before the fetch and removed
// after it). Only the sync is timed, not the upstream's commit; its CPU
// (this process's and its gits') is reported beside the wall time.
func BenchmarkArchiveFetch(b *testing.B) {
	refs := benchsize.Of(2000, 20)
	for _, archive := range []bool{false, true} {
		for _, move := range []string{"force-push", "fast-forward"} {
			b.Run(fmt.Sprintf("archive=%v/%s", archive, move), func(b *testing.B) {
				benchArchiveFetch(b, refs, archive, move == "force-push")
			})
		}
	}
}

func benchArchiveFetch(b *testing.B, refs int, archive, force bool) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	if err := up.Create("r", []string{"main"}, nil); err != nil {
		b.Fatal(err)
	}
	names := make([]string, refs)
	for i := range names {
		names[i] = fmt.Sprintf("refs/heads/branch-%05d", i)
	}
	if err := up.AddRefs("r", "main", names); err != nil {
		b.Fatal(err)
	}
	st, err := mirror.Open(b.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	st.SetArchive(mirror.ArchivePolicy{All: archive})
	ctx := context.Background()
	url := up.RepoURL("r")
	key := repokey.Key(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), ".git"))
	bare := filepath.Join(up.Dir, "r.git")
	sync := func() mirror.Result {
		res, err := st.Sync(ctx, key, url)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	sync()
	base, err := gittest.Output("", "--git-dir="+bare, "rev-parse", "refs/heads/main")
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration // the syncs' CPU, this process's and its gits'
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := up.AddBlob("r", "main", 1024); err != nil {
			b.Fatal(err)
		}
		if force {
			sync()
			if err := gittest.Git("", "--git-dir="+bare, "update-ref", "refs/heads/main", strings.TrimSpace(base)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		before := cpuTime()
		if res := sync(); !res.Changed || (len(res.Dropped) == 1) != force {
			b.Fatalf("the sync changed %v and dropped %v", res.Changed, res.Dropped)
		}
		cpu += cpuTime() - before
	}
	b.StopTimer()
	kept, err := st.Archive(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	want := 0
	if archive && force {
		want = min(b.N, mirror.DefaultArchiveMaxRefs)
	}
	if len(kept) != want {
		b.Fatalf("%d archive refs, want %d", len(kept), want)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/sync")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/sync")
}

// cpuTime is the CPU time of this process and of its children waited for
// (every git a sync runs), user and system: on a loaded machine a
// process's wall time is mostly waiting for a core, its CPU time is not.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}
