package gitserve_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// BenchmarkWantsCheck measures what the check that a request's wants and
// haves are reached by the served refs costs a fetch that asks for more
// than ref tips (a fetch of tips only runs no process for it), on a
// synthetic history (200 files, 1,000 commits, repacked with a bitmap and
// a commit graph, as a mirror's maintenance leaves it) and, with
// GITFLEET_BENCH_REPO, on a real mirror (only read; it must have its
// bitmap and commit graph). Each reports the CPU time of its git processes
// (git-cpu-ms/op) besides the wall time:
//
//   - exists: one cat-file, all that a standalone mirror's tree or blob
//     want cost before they were checked against the refs;
//   - blob, tree: a want of a blob, or a tree, of main's last 2,000
//     commits, picked at random (the check alone keeps no answer);
//   - commit: a want of a commit of main's history (main~n, n random);
//   - have50, have5000: a client's tip 50 or 5,000 commits behind main,
//     sent as a have (one of the 500 commits from there).
//
// Without a bitmap (synthetic/blob/nobitmap) a tree or blob that the first
// walk does not mark costs a listing of what the refs reach.
func BenchmarkWantsCheck(b *testing.B) {
	repos := []struct{ name, dir string }{{"synthetic", ""}}
	if dir := os.Getenv(benchRepoEnv); dir != "" {
		repos = append(repos, struct{ name, dir string }{"real", dir})
	}
	git := gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{})
	ctx := context.Background()
	for _, repo := range repos {
		b.Run(repo.name, func(b *testing.B) {
			dir := repo.dir
			if dir == "" {
				dir = synthMirror(b)
			}
			commits := lines(b, dir, "rev-list", "--first-parent", "--max-count=6000", "main")
			var blobs, trees []string
			for _, l := range lines(b, dir, "log", "--format=", "--raw", "--no-abbrev", "--max-count=2000", "main") {
				if f := strings.Fields(l); len(f) >= 4 && gitcmd.IsOID(f[3]) && f[3] != strings.Repeat("0", 40) {
					blobs = append(blobs, f[3])
				}
			}
			for _, c := range commits[1:min(len(commits), 2000)] {
				trees = append(trees, c+"^{tree}")
			}
			trees = lines(b, dir, append([]string{"rev-parse"}, trees...)...)
			rng := rand.New(rand.NewPCG(1, 2))
			pick := func(ids []string) string { return ids[rng.IntN(len(ids))] }
			want := func(ids []string) func(b *testing.B) {
				return func(b *testing.B) {
					defer gitCPU(b)()
					for range b.N {
						if err := gitserve.CheckWants(ctx, git, dir, []string{pick(ids)}); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			have := func(behind int) func(b *testing.B) {
				return func(b *testing.B) {
					if behind+500 > len(commits) {
						b.Skipf("main has %d commits", len(commits))
					}
					defer gitCPU(b)()
					for i := range b.N {
						c := commits[behind+i%500]
						unreached, err := gitserve.UnreachedHaves(ctx, git, dir, []string{c})
						if err != nil || unreached > 0 {
							b.Fatalf("have %s: %v %v", c, unreached, err)
						}
					}
				}
			}
			b.Run("exists", func(b *testing.B) {
				defer gitCPU(b)()
				for range b.N {
					if err := gitserve.ObjectTypes(ctx, git, dir, []string{pick(blobs)}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("blob", want(blobs))
			b.Run("tree", want(trees))
			b.Run("commit", want(commits[1:]))
			b.Run("have50", have(50))
			b.Run("have5000", have(5000))
			if repo.dir == "" {
				if err := os.Remove(filepath.Join(dir, "objects", "pack", packBitmap(b, dir))); err != nil {
					b.Fatal(err)
				}
				b.Run("blob/nobitmap", want(blobs))
			}
		})
	}
}

// gitCPU reports the CPU time of the git processes that the benchmark
// ran, a run (git-cpu-ms/op): on a loaded machine a process's wall time
// is mostly its wait for a core. Call the function it returns at the end.
func gitCPU(b *testing.B) func() {
	before := rusage(syscall.RUSAGE_CHILDREN)
	return func() {
		b.ReportMetric(float64(rusage(syscall.RUSAGE_CHILDREN)-before)/float64(time.Millisecond)/float64(b.N), "git-cpu-ms/op")
	}
}

// synthMirror is synthHistory repacked as a mirror's maintenance leaves
// it: one pack with a bitmap, and a commit graph.
func synthMirror(b *testing.B) string {
	dir := synthHistory(b, 200, 1000)
	if err := gittest.Git(dir, "repack", "-a", "-d", "-b", "-q"); err != nil {
		b.Fatal(err)
	}
	if err := gittest.Git(dir, "commit-graph", "write", "--reachable"); err != nil {
		b.Fatal(err)
	}
	return dir
}

// packBitmap names the bitmap file of the repository at dir.
func packBitmap(b *testing.B, dir string) string {
	m, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.bitmap"))
	if err != nil || len(m) != 1 {
		b.Fatalf("bitmaps of %s: %v %v", dir, m, err)
	}
	return filepath.Base(m[0])
}

// lines runs git in the repository at dir and returns its output's lines.
func lines(b *testing.B, dir string, args ...string) []string {
	b.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
	cmd.Env = gittest.Env()
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
