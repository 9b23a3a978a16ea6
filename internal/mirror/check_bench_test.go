package mirror_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// cpuNow is the CPU time of this process and of its children that ended.
func cpuNow() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// plainGit runs git as a shell loop would, with the environment gitcmd's
// own tests use.
func plainGit(b *testing.B, dir string, args ...string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gittest.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// BenchmarkCheck compares a mirror's checks with plain git doing the same
// over the network, alternating in one run against the same upstream
// server (in this process, so its CPU counts on both sides):
//
//   - unchanged: a check of an unchanged repository (Store.Sync) against
//     `git ls-remote --heads --tags`, 4 at a time over 16 repositories:
//     checks per second and CPU per check;
//   - one-commit: an on-demand sync that brings one new commit against
//     `git ls-remote` + `git fetch` of the same into a plain bare copy:
//     wall and CPU time.
func BenchmarkCheck(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	repos, conc := benchsize.Of(16, 4), 4
	branches := []string{"main"}
	for i := 0; i < 9; i++ {
		branches = append(branches, fmt.Sprintf("b%d", i))
	}
	urls := make([]string, repos)
	for i := range urls {
		name := fmt.Sprintf("r%02d", i)
		if err := up.Create(name, branches, []string{"v1", "v2", "v3"}); err != nil {
			b.Fatal(err)
		}
		urls[i] = up.RepoURL(name)
	}
	ctx := context.Background()
	st, err := mirror.Open(b.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]repokey.Key, repos)
	for i, u := range urls {
		keys[i] = keyOf(b, u)
		if _, err := st.Sync(ctx, keys[i], u); err != nil {
			b.Fatal(err)
		}
	}
	// run does n checks, conc at a time, and returns the wall and CPU time.
	run := func(n int, one func(i int)) (time.Duration, time.Duration) {
		cpu, start := cpuNow(), time.Now()
		var wg sync.WaitGroup
		next := make(chan int)
		for w := 0; w < conc; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					one(i)
				}
			}()
		}
		for i := 0; i < n; i++ {
			next <- i % repos
		}
		close(next)
		wg.Wait()
		return time.Since(start), cpuNow() - cpu
	}
	check := func(i int) {
		res, err := st.Sync(ctx, keys[i], urls[i])
		if err != nil || res.Fetched {
			b.Fatalf("check of an unchanged repository: %+v, %v", res, err)
		}
	}
	lsRemote := func(i int) { plainGit(b, "", "ls-remote", "--heads", "--tags", urls[i]) }

	// A plain bare copy for the baseline of the one-commit sync.
	plain := filepath.Join(b.TempDir(), "plain.git")
	plainGit(b, "", "clone", "-q", "--bare", urls[0], plain)

	var wall, cpu [2]time.Duration // [0] gitfleet, [1] plain git
	var syncWall, syncCPU [2]time.Duration
	perRound := benchsize.Of(32, 4)
	b.ResetTimer()
	for r := 0; r < b.N; r++ {
		order := [2]int{0, 1}
		if r%2 == 1 {
			order = [2]int{1, 0}
		}
		for _, k := range order {
			f := check
			if k == 1 {
				f = lsRemote
			}
			w, c := run(perRound, f)
			wall[k] += w
			cpu[k] += c
		}
		if _, err := up.Commit("r00", "main"); err != nil {
			b.Fatal(err)
		}
		for _, k := range order {
			start, cpu0 := time.Now(), cpuNow()
			if k == 0 {
				res, err := st.Sync(ctx, keys[0], urls[0])
				if err != nil || !res.Changed {
					b.Fatalf("sync of one new commit: %+v, %v", res, err)
				}
			} else {
				plainGit(b, "", "ls-remote", "--heads", "--tags", urls[0])
				plainGit(b, "", "--git-dir="+plain, "fetch", "-q", "--prune", urls[0], "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
			}
			syncWall[k] += time.Since(start)
			syncCPU[k] += cpuNow() - cpu0
		}
	}
	b.StopTimer()
	n := float64(b.N * perRound)
	b.ReportMetric(n/wall[0].Seconds(), "checks/s")
	b.ReportMetric(n/wall[1].Seconds(), "ls-remotes/s")
	b.ReportMetric(wall[1].Seconds()/wall[0].Seconds(), "rate-ratio")
	b.ReportMetric(cpu[0].Seconds()/cpu[1].Seconds(), "cpu-ratio")
	b.ReportMetric(float64(cpu[0].Microseconds())/n, "cpu-µs/check")
	b.ReportMetric(float64(syncWall[0].Milliseconds())/float64(b.N), "ms/sync")
	b.ReportMetric(syncWall[0].Seconds()/syncWall[1].Seconds(), "sync-ratio")
	b.ReportMetric(syncCPU[0].Seconds()/syncCPU[1].Seconds(), "sync-cpu-ratio")
}
