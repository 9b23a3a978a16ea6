//go:build unix

package mirror_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// The environment of BenchmarkFirstMirrors.
const (
	// benchUpstreamsEnv lists bare repositories (space-separated paths)
	// to serve: the N upstreams are copies of them in turn (name one
	// several times to weigh it). Unset: a synthetic repository.
	benchUpstreamsEnv = "GITFLEET_BENCH_UPSTREAMS"
	// benchFirstMirrorsEnv is N (default 100).
	benchFirstMirrorsEnv = "GITFLEET_BENCH_FIRST_MIRRORS"
	// backendRootEnv makes TestHTTPBackendServer serve that directory.
	backendRootEnv = "GITFLEET_HTTP_BACKEND_ROOT"
)

// TestHTTPBackendServer is BenchmarkFirstMirrors' git server, not a test:
// the benchmark runs the test binary with it, so that the server's CPU
// (git http-backend, upload-pack) is another process's and not counted
// as the clients'. It prints its URL and serves until its stdin closes.
func TestHTTPBackendServer(t *testing.T) {
	root := os.Getenv(backendRootEnv)
	if root == "" {
		t.Skip("BenchmarkFirstMirrors' server: started by the benchmark")
	}
	h, err := gittest.NewBackend(root)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

// BenchmarkFirstMirrors mirrors N repositories from scratch (default 100:
// GITFLEET_BENCH_FIRST_MIRRORS) with Store.Sync, 10 at a time, and makes
// the same copies with `xargs -P10 git clone --mirror`, over one local git
// http-backend in another process, in one run. It reports the wall time
// and the CPU (of this process and of every git it waited for: the
// clients, not the server) of the mirrors over the clones', and the
// upstream requests per new repository of each. Two more loops of clones
// say what the mirrors' extra work costs: each clone followed by the
// bitmap and commit graph a first mirror gets (clone+maint), and that with
// the objects checked as a mirror's are (clone+fsck+maint:
// transfer.fsckObjects with the same settings). The upstreams are copies of
// the repositories GITFLEET_BENCH_UPSTREAMS names (their branches and tags,
// repacked with a bitmap as a host keeps them; they must be complete), or
// of a synthetic one. Everything is made under b.TempDir.
func BenchmarkFirstMirrors(b *testing.B) {
	n := benchsize.Of(100, 2)
	if s := os.Getenv(benchFirstMirrorsEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("%s=%q: want a positive number", benchFirstMirrorsEnv, s)
		}
		n = v
	}
	root := b.TempDir()
	var sources []string
	if env := os.Getenv(benchUpstreamsEnv); env != "" {
		for i, src := range strings.Fields(env) {
			dst := filepath.Join(root, fmt.Sprintf("src-%d.git", i))
			if err := gittest.Git("", "clone", "-q", "--bare", "--no-local", src, dst); err != nil {
				b.Fatalf("copy %s (it must be a complete repository): %v", src, err)
			}
			sources = append(sources, dst)
		}
	} else {
		up := &gittest.Upstreams{Dir: root}
		sources = append(sources, filepath.Join(root, synthRepo(b, up, "src-synthetic", 3000, 2000, 8)+".git"))
	}
	for _, src := range sources {
		if err := gittest.Git("", "--git-dir="+src, "repack", "-adbq"); err != nil {
			b.Fatal(err)
		}
	}
	var names []string
	for i := range n {
		name := fmt.Sprintf("repo-%03d", i)
		if err := os.Symlink(sources[i%len(sources)], filepath.Join(root, name+".git")); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	url, requests := startBackend(b, root)

	clones := func(b *testing.B, script string) (time.Duration, time.Duration, float64) {
		dst, err := os.MkdirTemp(b.TempDir(), "clones-")
		if err != nil {
			b.Fatal(err)
		}
		var args strings.Builder
		for _, name := range names {
			fmt.Fprintf(&args, "%s/%s.git %s/%s.git\n", url, name, dst, name)
		}
		cmd := exec.Command("xargs", "-P10", "-n2", "sh", "-c", script, "sh")
		cmd.Env = gittest.Env()
		cmd.Stdin = strings.NewReader(args.String())
		r0, c0, t0 := requests(), cpuNow(), time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", script, err, out)
		}
		wall, cpu := time.Since(t0), cpuNow()-c0
		perRepo := float64(requests()-r0) / float64(n)
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
		return wall, cpu, perRepo
	}
	const (
		clone = `git clone -q --mirror "$1" "$2"`
		// In freshMaintenance's order: the commit graph first, which the
		// bitmap's walk then reads.
		maint = ` && git --git-dir="$2" pack-refs --all` +
			` && git --git-dir="$2" commit-graph write --reachable --split=replace --no-progress` +
			` && git --git-dir="$2" repack --geometric=2 -d --write-midx --write-bitmap-index -n -q --threads=1`
	)
	fsck := strings.Join(append([]string{"git"}, configFlags(mirror.FsckConfig())...), " ") + ` clone -q --mirror "$1" "$2"`
	mirrors := func(b *testing.B) (time.Duration, time.Duration, float64) {
		data, err := os.MkdirTemp(b.TempDir(), "mirrors-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(data)
		st, err := mirror.Open(data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		work := make(chan string)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		r0, c0, t0 := requests(), cpuNow(), time.Now()
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for name := range work {
					u := url + "/" + name + ".git"
					if _, err := st.Sync(context.Background(), repokey.Key(strings.TrimPrefix(u[:len(u)-4], "http://")), u); err != nil {
						errs <- fmt.Errorf("%s: %w", name, err)
					}
				}
			}()
		}
		for _, name := range names {
			work <- name
		}
		close(work)
		wg.Wait()
		wall, cpu := time.Since(t0), cpuNow()-c0
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return wall, cpu, float64(requests()-r0) / float64(n)
	}

	clones(b, clone) // warms the server's files
	var mWall, mCPU, cWall, cCPU, bWall, bCPU, fWall, fCPU time.Duration
	var mReq, cReq float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		steps := []func(){
			func() { w, c, r := mirrors(b); mWall, mCPU, mReq = mWall+w, mCPU+c, r },
			func() { w, c, r := clones(b, clone); cWall, cCPU, cReq = cWall+w, cCPU+c, r },
			func() { w, c, _ := clones(b, clone+maint); bWall, bCPU = bWall+w, bCPU+c },
			func() { w, c, _ := clones(b, fsck+maint); fWall, fCPU = fWall+w, fCPU+c },
		}
		if i%2 == 1 { // the other order, so that drift favours neither
			for l, r := 0, len(steps)-1; l < r; l, r = l+1, r-1 {
				steps[l], steps[r] = steps[r], steps[l]
			}
		}
		for _, step := range steps {
			step()
		}
	}
	b.StopTimer()
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	b.ReportMetric(mWall.Seconds()/float64(b.N), "mirror_wall_s")
	b.ReportMetric(mCPU.Seconds()/float64(b.N), "mirror_cpu_s")
	b.ReportMetric(cWall.Seconds()/float64(b.N), "clone_wall_s")
	b.ReportMetric(cCPU.Seconds()/float64(b.N), "clone_cpu_s")
	b.ReportMetric(ratio(mWall, cWall), "wall/clone")
	b.ReportMetric(ratio(mCPU, cCPU), "cpu/clone")
	b.ReportMetric(ratio(mWall, bWall), "wall/clone+maint")
	b.ReportMetric(ratio(mCPU, bCPU), "cpu/clone+maint")
	b.ReportMetric(ratio(mWall, fWall), "wall/clone+fsck+maint")
	b.ReportMetric(ratio(mCPU, fCPU), "cpu/clone+fsck+maint")
	b.ReportMetric(mReq, "mirror_requests/repo")
	b.ReportMetric(cReq, "clone_requests/repo")
}

// configFlags turns git settings into -c flags.
func configFlags(settings []string) []string {
	var out []string
	for _, kv := range settings {
		out = append(out, "-c", kv)
	}
	return out
}

// startBackend runs TestHTTPBackendServer on root in a child process, and
// returns its URL and a function that reads its request count.
func startBackend(b *testing.B, root string) (string, func() int64) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHTTPBackendServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), backendRootEnv+"="+root)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the git server did not start: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	url := strings.TrimSpace(line)
	return url, func() int64 {
		resp, err := http.Get(url + "/-/requests")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		v, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
		if err != nil {
			b.Fatalf("request count %q: %v", body, err)
		}
		return v
	}
}

// BenchmarkFirstMirrorBitmap compares the ways to give a fresh clone's one
// pack a bitmap, by the CPU of git (user and system) on copies of one
// fresh clone: `git repack -a -d -b` (the pack rewritten, with a bitmap of
// its own) and the multi-pack index with a bitmap over the pack as it is
// (`git repack --geometric=2 -d --write-midx --write-bitmap-index`, what
// freshMaintenance runs), and the commit graph written after either. The
// repository is the first of GITFLEET_BENCH_UPSTREAMS, or a synthetic one.
func BenchmarkFirstMirrorBitmap(b *testing.B) {
	root := b.TempDir()
	src := filepath.Join(root, "src.git")
	if env := strings.Fields(os.Getenv(benchUpstreamsEnv)); len(env) > 0 {
		src = env[0]
	} else {
		up := &gittest.Upstreams{Dir: root}
		synthRepo(b, up, "src", 3000, 2000, 8)
	}
	fresh := filepath.Join(root, "fresh.git")
	if err := gittest.Git("", "clone", "-q", "--mirror", "--no-local", src, fresh); err != nil {
		b.Fatal(err)
	}
	gitCPU := func(args ...string) time.Duration {
		cmd := exec.Command("git", args...)
		cmd.Env = gittest.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	ways := []struct {
		name string
		args []string
	}{
		{"repack-adb", []string{"repack", "-a", "-d", "-b", "-n", "-q", "--threads=1"}},
		{"midx-bitmap", []string{"repack", "--geometric=2", "-d", "--write-midx", "--write-bitmap-index", "-n", "-q", "--threads=1"}},
	}
	cpu := make([]time.Duration, len(ways))
	var graph time.Duration
	for i := 0; b.Loop(); i++ {
		for j := range ways {
			w := ways[(i+j)%len(ways)] // alternating first
			dir := filepath.Join(root, "copy.git")
			if out, err := exec.Command("cp", "-a", fresh, dir).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v: %s", err, out)
			}
			cpu[(i+j)%len(ways)] += gitCPU(append([]string{"--git-dir=" + dir}, w.args...)...)
			graph += gitCPU("--git-dir="+dir, "commit-graph", "write", "--reachable", "--split=replace", "--no-progress")
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
		}
	}
	for j, w := range ways {
		b.ReportMetric(float64(cpu[j].Milliseconds())/float64(b.N), w.name+"_cpu_ms")
	}
	b.ReportMetric(float64(graph.Milliseconds())/float64(2*b.N), "commit-graph_cpu_ms")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "midx/repack")
}
