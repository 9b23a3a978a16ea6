package gitserve_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// benchRepoEnv names a bare repository for the serving benchmarks to run on
// besides their synthetic one (a real project's mirror: a clone --mirror
// with a bitmap, as maintenance leaves one). It is only read.
const benchRepoEnv = "GITFLEET_BENCH_REPO"

// BenchmarkServeFloor compares, in one run, the server CPU (the server's
// goroutines and the git processes it runs, without the clients') and the
// wall time that gitfleet's Handler with its pack cache and git
// http-backend (run as CGI, with uploadpack.allowFilter) spend on:
//
//   - identical8: 8 concurrent stock clones (a CI farm); gitfleet-warm is
//     the same with the answer already kept;
//   - fetch50: a fetch of about 50 new commits of main;
//   - blobnone: a --filter=blob:none clone;
//   - depth1: a --depth 1 clone;
//   - full: one clone, whose git processes are compared with one local
//     upload-pack answering the same requests (what a `git clone
//     --no-local` runs), the Handler's own CPU (the HTTP relay) apart.
//
// Each round of gitfleet starts from a new Handler and an empty cache: one
// request pays for every listing and check it needs. It runs on a
// synthetic history (200 files, 1,000 commits, packed with deltas and a
// bitmap, as a mirror's maintenance leaves it) and on the repository that
// GITFLEET_BENCH_REPO names, if any. Run it with -benchtime 2x or more
// (both orders).
func BenchmarkServeFloor(b *testing.B) {
	repos := []struct{ name, dir string }{{"synthetic", ""}}
	if dir := os.Getenv(benchRepoEnv); dir != "" {
		repos = append(repos, struct{ name, dir string }{"real", dir})
	}
	for _, repo := range repos {
		b.Run(repo.name, func(b *testing.B) {
			fb := newFloorBench(b, repo.dir)
			b.Run("identical8", fb.identical8)
			b.Run("fetch50", fb.fetch50)
			b.Run("blobnone", func(b *testing.B) { fb.versusBackend(b, "--filter=blob:none") })
			b.Run("depth1", func(b *testing.B) { fb.versusBackend(b, "--depth", "1") })
			b.Run("full", fb.full)
		})
	}
}

// floorBench serves one repository from both servers.
type floorBench struct {
	dir        string
	backendURL string
}

func newFloorBench(b *testing.B, dir string) *floorBench {
	if dir == "" {
		dir = synthHistory(b, benchsize.Of(200, 20), benchsize.Of(1000, 60))
		if err := gittest.Git(dir, "repack", "-a", "-d", "-f", "-b", "-q"); err != nil {
			b.Fatal(err)
		}
	} else if fi, err := os.Stat(filepath.Join(dir, "objects")); err != nil || !fi.IsDir() {
		b.Fatalf("%s=%s: not a bare repository", benchRepoEnv, dir)
	}
	return &floorBench{dir: dir, backendURL: httpBackend(b, dir)}
}

// httpBackend serves the bare repository dir with git http-backend, through
// net/http/cgi as a plain server runs it (with uploadpack.allowFilter, as
// the Handler has it), until the benchmark ends, and returns its URL.
func httpBackend(b *testing.B, dir string) string {
	execPath, err := gittest.Output("", "--exec-path")
	if err != nil {
		b.Fatal(err)
	}
	backend := httptest.NewServer(&cgi.Handler{Path: filepath.Join(strings.TrimSpace(execPath), "git-http-backend"), Root: "/",
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=uploadpack.allowFilter", "GIT_CONFIG_VALUE_0=true"},
		InheritEnv: []string{"PATH", "HOME"}})
	b.Cleanup(backend.Close)
	return backend.URL + "/" + filepath.Base(dir)
}

// gitfleet serves the repository from a new Handler with an empty cache.
func (fb *floorBench) gitfleet(b *testing.B) (url string, h *gitserve.Handler, stop func()) {
	c, err := gitserve.NewPackCache(filepath.Join(b.TempDir(), "packcache"), gitserve.CacheConfig{MaxBytes: 1 << 30, TTL: time.Hour}, nil)
	if err != nil {
		b.Fatal(err)
	}
	// Every client comes from 127.0.0.1: no per-client cap.
	h = &gitserve.Handler{Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Resolve: func(repokey.Key) (string, bool) { return fb.dir, true }, Cache: c,
		Limits: gitserve.Limits{MaxUploadPacks: 32, MaxPerRepo: 8, QueueWait: time.Minute, QueueLength: 128}}
	// What the served git advertises is read once a process.
	if err := gitserve.ReadCapabilities(context.Background(), h); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	return srv.URL + "/example.com/r.git", h, srv.Close
}

// cost is what the server spent on some clients' requests.
type cost struct {
	wall, git, self time.Duration // git: the processes it ran; self: its goroutines
}

func (c cost) cpu() time.Duration { return c.git + c.self }

func (c *cost) add(d cost) { c.wall, c.git, c.self = c.wall+d.wall, c.git+d.git, c.self+d.self }

// serverCost runs clients in a scratch directory, which return the CPU
// time of the processes they ran, and returns what this process and its
// other children spent meanwhile: the servers' share. The scratch
// directory is removed after (its unlinks are nobody's serving), and the
// garbage collector runs before.
func serverCost(b *testing.B, clients func(scratch string) time.Duration) cost {
	b.Helper()
	scratch, err := os.MkdirTemp(b.TempDir(), "clients")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(scratch)
	runtime.GC() // the garbage of what came before (a history's making) is nobody's serving
	children, self := rusage(syscall.RUSAGE_CHILDREN), rusage(syscall.RUSAGE_SELF)
	start := time.Now()
	clientCPU := clients(scratch)
	return cost{wall: time.Since(start), git: rusage(syscall.RUSAGE_CHILDREN) - children - clientCPU, self: rusage(syscall.RUSAGE_SELF) - self}
}

// gitClient runs a stock git (protocol v2) in dir and returns its CPU time
// and that of the processes it waited for.
func gitClient(b *testing.B, dir string, args ...string) time.Duration {
	cmd := exec.Command("git", append([]string{"-c", "protocol.version=2"}, args...)...)
	cmd.Dir, cmd.Env = dir, gittest.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return cloneCPU(cmd.ProcessState)
}

// clones runs n concurrent bare clones of url, with extra arguments, into
// base.
func clones(b *testing.B, base, url string, n int, args ...string) time.Duration {
	var mu sync.Mutex
	var total time.Duration
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cpu := gitClient(b, "", append(append([]string{"clone", "-q", "--bare"}, args...), url, filepath.Join(base, strconv.Itoa(i)))...)
			mu.Lock()
			total += cpu
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

// rounds runs b.N rounds of one request pattern against both servers, in
// both orders, and reports their ratios. warm, when set, is also measured
// against a Handler that served the pattern once already.
func (fb *floorBench) rounds(b *testing.B, pattern func(url, scratch string) time.Duration, warm bool) {
	url, _, stop := fb.gitfleet(b)
	serverCost(b, func(scratch string) time.Duration { return pattern(url, scratch) }) // the page cache
	stop()
	serverCost(b, func(scratch string) time.Duration { return pattern(fb.backendURL, scratch) })
	var backend, ours, kept cost
	b.ResetTimer()
	for i := range b.N {
		url, _, stop := fb.gitfleet(b)
		if i%2 == 0 {
			backend.add(serverCost(b, func(scratch string) time.Duration { return pattern(fb.backendURL, scratch) }))
		}
		ours.add(serverCost(b, func(scratch string) time.Duration { return pattern(url, scratch) }))
		if i%2 == 1 {
			backend.add(serverCost(b, func(scratch string) time.Duration { return pattern(fb.backendURL, scratch) }))
		}
		if warm {
			kept.add(serverCost(b, func(scratch string) time.Duration { return pattern(url, scratch) }))
		}
		stop()
	}
	b.StopTimer()
	reportVersusBackend(b, backend.wall, backend.cpu(), ours.wall, ours.cpu())
	b.ReportMetric(ours.self.Seconds()/float64(b.N), "gitfleet-self-cpu-s")
	if warm {
		b.ReportMetric(kept.cpu().Seconds()/backend.cpu().Seconds(), "warm-cpu-ratio")
		b.ReportMetric(kept.wall.Seconds()/backend.wall.Seconds(), "warm-wall-ratio")
	}
}

func (fb *floorBench) identical8(b *testing.B) {
	fb.rounds(b, func(url, scratch string) time.Duration { return clones(b, scratch, url, 8) }, true)
}

func (fb *floorBench) versusBackend(b *testing.B, args ...string) {
	fb.rounds(b, func(url, scratch string) time.Duration { return clones(b, scratch, url, 1, args...) }, false)
}

// fetch50 fetches main into a copy of a clone that has main about 50
// commits behind (and nothing else).
func (fb *floorBench) fetch50(b *testing.B) {
	tmpl, n := fb.behind(b, 50)
	defer b.ReportMetric(float64(n), "commits") // after rounds, whose timer reset drops metrics
	fb.rounds(b, func(url, scratch string) time.Duration {
		dir := filepath.Join(scratch, "c.git")
		cp := exec.Command("cp", "-al", tmpl, dir) // git replaces, never rewrites, what it changes
		if out, err := cp.CombinedOutput(); err != nil {
			b.Fatalf("copying the clone: %v: %s", err, out)
		}
		return cloneCPU(cp.ProcessState) + gitClient(b, dir, "fetch", "-q", "--no-tags", url, "+refs/heads/main:refs/heads/main")
	}, false)
}

// behind makes a bare repository holding only main at the first commit
// that has at least n commits of main after it, and returns it with that
// number.
func (fb *floorBench) behind(b *testing.B, n int) (dir string, commits int) {
	var base string
	for k := n; ; k++ {
		rev := fmt.Sprintf("main~%d", k)
		out, err := gittest.Output(fb.dir, "rev-list", "--count", rev+"..main")
		if err != nil {
			b.Fatal(err)
		}
		if commits, _ = strconv.Atoi(strings.TrimSpace(out)); commits >= n || k > 10*n {
			if base, err = gittest.Output(fb.dir, "rev-parse", rev); err != nil {
				b.Fatal(err)
			}
			break
		}
	}
	dir = filepath.Join(b.TempDir(), "behind.git")
	if err := gittest.Git("", "init", "-q", "--bare", dir); err != nil {
		b.Fatal(err)
	}
	if err := gittest.Git(dir, "-c", "protocol.version=2", "fetch", "-q", "--no-tags", "file://"+fb.dir,
		strings.TrimSpace(base)+":refs/heads/main"); err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "FETCH_HEAD")); err != nil { // written in place by the next fetch: not to share
		b.Fatal(err)
	}
	return dir, commits
}

// full compares the git processes of one clone from the Handler with one
// local upload-pack (protocol v2, as `git clone --no-local` runs it)
// answering the requests that clone sent, in one run; the Handler's own
// CPU, the HTTP relay, is reported apart.
func (fb *floorBench) full(b *testing.B) {
	var mu sync.Mutex
	var requests []byte // the clone's POST bodies, in order
	record := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				plain := body
				if r.Header.Get("Content-Encoding") == "gzip" {
					gz, err := gzip.NewReader(bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					if plain, err = io.ReadAll(gz); err != nil {
						b.Error(err)
						return
					}
				}
				mu.Lock()
				requests = append(requests, plain...)
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}
	var answer int64 // bytes of the clone's pack answer
	var runs int64   // the upload-packs of the clones
	serve := func(recorded bool) (string, func()) {
		_, h, stop := fb.gitfleet(b)
		var handler http.Handler = h
		if recorded {
			handler = record(h)
		}
		srv := httptest.NewServer(handler)
		before, _ := gitserve.SharedRuns(h)
		return srv.URL + "/example.com/r.git", func() {
			answer = h.Cache.Stats().Bytes
			answers, _ := gitserve.SharedRuns(h)
			runs += answers - before + h.Cache.Stats().Runs
			srv.Close()
			stop()
		}
	}
	url, stop := serve(true)
	serverCost(b, func(scratch string) time.Duration { return clones(b, scratch, url, 1) }) // the page cache, and the requests to replay
	stop()
	if requests == nil {
		b.Fatal("no request recorded")
	}
	local := func() time.Duration {
		cmd := exec.Command("git", "upload-pack", "--strict", fb.dir)
		cmd.Env = append(gittest.Env(), "GIT_PROTOCOL=version=2")
		cmd.Stdin, cmd.Stdout = bytes.NewReader(requests), io.Discard
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("local upload-pack: %v: %s", err, stderr.String())
		}
		return cloneCPU(cmd.ProcessState)
	}
	local()
	runs = 0
	var ours cost
	var upload time.Duration
	b.ResetTimer()
	for i := range b.N {
		url, stop := serve(false)
		if i%2 == 0 {
			upload += local()
		}
		ours.add(serverCost(b, func(scratch string) time.Duration { return clones(b, scratch, url, 1) }))
		if i%2 == 1 {
			upload += local()
		}
		stop()
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(upload), "local-upload-pack-cpu-s")
	b.ReportMetric(per(ours.git), "gitfleet-git-cpu-s")
	b.ReportMetric(ours.git.Seconds()/upload.Seconds(), "git-cpu-ratio")
	b.ReportMetric(per(ours.self), "relay-cpu-s")
	b.ReportMetric(ours.cpu().Seconds()/upload.Seconds(), "cpu-ratio")
	b.ReportMetric(float64(answer)/(1<<20), "MiB/answer")
	b.ReportMetric(float64(runs)/float64(b.N), "upload-packs/clone")
}
