package mirror_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// BenchmarkPeerCopyShare measures re-replicating a lost full node's share
// from a peer, as a full node copies each repository (fullnode/peer.go:
// the peer's refs listed, then mirror.PullVerifiedIn with that listing as
// the reference), against `git clone --mirror` of the same repositories
// from the same server. The server is a git smart-HTTP server on 127.0.0.1
// (the peer's serving, without the tunnel). Each round does both, in turn
// first; it reports each one's wall time and CPU (this process's children:
// git on both sides, the same server for both) per share, and the ratios.
func BenchmarkPeerCopyShare(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	n, blob := benchsize.Of(16, 2), benchsize.Of(1<<20, 4<<10)
	var names []string
	for i := range n {
		name := fmt.Sprintf("r%02d", i)
		if err := up.Create(name, []string{"main", "dev"}, []string{"v1"}); err != nil {
			b.Fatal(err)
		}
		for range 3 {
			if _, err := up.AddBlob(name, "main", blob); err != nil {
				b.Fatal(err)
			}
		}
		names = append(names, name)
	}
	git := gitcmd.New(gitcmd.Direct(), gitcmd.Options{})
	ctx := context.Background()
	copyShare := func() {
		st, err := mirror.Open(b.TempDir(), git, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range names {
			k, _, err := repokey.Normalize(up.RepoURL(name), repokey.Options{AllowPrivate: true})
			if err != nil {
				b.Fatal(err)
			}
			src := mirror.Source{URL: up.RepoURL(name)}
			refs, err := st.ListSource(ctx, repokey.Key(k), src)
			if err != nil {
				b.Fatal(err)
			}
			listed := func(context.Context, []string) (gitcmd.Refs, error) { return refs, nil }
			if _, err := st.PullVerifiedIn(ctx, repokey.Key(k), "", src, listed); err != nil {
				b.Fatal(err)
			}
		}
	}
	cloneShare := func() {
		dir := b.TempDir()
		for _, name := range names {
			if err := gittest.Git("", "clone", "-q", "--mirror", up.RepoURL(name), filepath.Join(dir, name+".git")); err != nil {
				b.Fatal(err)
			}
		}
	}
	measure := func(fn func()) (time.Duration, time.Duration) {
		cpu := func() time.Duration {
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
				b.Fatal(err)
			}
			return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		c0, t0 := cpu(), time.Now()
		fn()
		return time.Since(t0), cpu() - c0
	}
	var wall, cpu [2]time.Duration // 0: the peer copy, 1: clone --mirror
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			which := (i + j) % 2
			fn := copyShare
			if which == 1 {
				fn = cloneShare
			}
			w, c := measure(fn)
			wall[which] += w
			cpu[which] += c
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(wall[0]), "copy_s/share")
	b.ReportMetric(per(wall[1]), "clone_s/share")
	b.ReportMetric(per(cpu[0]), "copy_cpu_s/share")
	b.ReportMetric(per(cpu[1]), "clone_cpu_s/share")
	b.ReportMetric(wall[0].Seconds()/wall[1].Seconds(), "time_ratio")
	b.ReportMetric(cpu[0].Seconds()/max(cpu[1].Seconds(), 1e-9), "cpu_ratio")
}
