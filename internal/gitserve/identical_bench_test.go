package gitserve_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// synthHistory makes a bare repository with a history of text files, as a
// project's: files of about 18 KiB of words, and commits that each change
// a few lines of a few files. fast-import stores each version as a
// full object.
func synthHistory(tb testing.TB, files, commits int) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "history.git")
	if err := gittest.Git("", "init", "-q", "--bare", "-b", "main", dir); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = gittest.Env()
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	rng := rand.New(rand.NewChaCha8([32]byte{7}))
	words := make([]string, 4096)
	for i := range words {
		b := make([]byte, 3+rng.IntN(8))
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		words[i] = string(b)
	}
	line := func() string {
		var b bytes.Buffer
		for range 10 {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		b.WriteByte('\n')
		return b.String()
	}
	content := make([][]string, files)
	for i := range content {
		for range 250 {
			content[i] = append(content[i], line())
		}
	}
	writeFile := func(i int) {
		var b bytes.Buffer
		for _, l := range content[i] {
			b.WriteString(l)
		}
		fmt.Fprintf(w, "M 100644 inline src/d%02d/f%04d.txt\ndata %d\n", i%50, i, b.Len())
		_, _ = w.Write(b.Bytes())
		w.WriteString("\n")
	}
	for c := range commits {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter bench <b@gitfleet.invalid> %d +0000\ndata 9\nchange %d\n", 1700000000+c*60, c%10)
		if c == 0 {
			for i := range files {
				writeFile(i)
			}
		} else {
			for range 4 {
				i := rng.IntN(files)
				for range 3 {
					content[i][rng.IntN(len(content[i]))] = line()
				}
				writeFile(i)
			}
		}
		w.WriteString("\n")
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// cloneCPU is the CPU time of a finished process and of the children it
// waited for.
func cloneCPU(ps *os.ProcessState) time.Duration {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return 0
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// identicalClones runs n stock clones of url at once and returns their
// wall time and the CPU time the server spent: the children of this
// process that are not the clients (git processes a server ran), and this
// process's own (the server's goroutines).
func identicalClones(b *testing.B, url string, n int) (wall, server time.Duration) {
	b.Helper()
	children, self := rusage(syscall.RUSAGE_CHILDREN), rusage(syscall.RUSAGE_SELF)
	base := b.TempDir()
	clients := make(chan time.Duration, n)
	errs := make(chan error, n)
	start := time.Now()
	for i := range n {
		go func() {
			cmd := exec.Command("git", "-c", "protocol.version=2", "clone", "-q", "--bare", url, filepath.Join(base, fmt.Sprint(i)))
			cmd.Env = gittest.Env()
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("clone from %s: %w: %s", url, err, out)
			}
			errs <- err
			clients <- cloneCPU(cmd.ProcessState)
		}()
	}
	var clientCPU time.Duration
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		clientCPU += <-clients
	}
	wall = time.Since(start)
	server = rusage(syscall.RUSAGE_CHILDREN) - children - clientCPU + rusage(syscall.RUSAGE_SELF) - self
	_ = os.RemoveAll(base)
	return wall, server
}

// BenchmarkIdenticalClones runs 8 concurrent stock clones (protocol v2) of
// one repository from git http-backend (through net/http/cgi, as a plain
// server runs it) and from the Handler with its pack cache, in one run,
// and reports the server CPU and the wall time of each. The repository is
// a history of text files (200 files of 18 KiB, 1,000 commits of 4 files,
// 77 MiB of content): "packed" is one pack with deltas and no bitmap, as a
// fresh mirror; "loose" has every object loose, as a mirror's fetches leave
// them before maintenance. Each round starts with an empty cache. Run it
// with -benchtime 2x (both orders).
func BenchmarkIdenticalClones(b *testing.B) {
	for _, loose := range []bool{false, true} {
		name := map[bool]string{false: "packed", true: "loose"}[loose]
		b.Run(name, func(b *testing.B) { benchIdenticalClones(b, loose) })
	}
}

func benchIdenticalClones(b *testing.B, loose bool) {
	const n = 8
	dir := synthHistory(b, benchsize.Of(200, 20), benchsize.Of(1000, 60))
	if err := gittest.Git(dir, "-c", "repack.writeBitmaps=false", "repack", "-a", "-d", "-f", "-q"); err != nil {
		b.Fatal(err)
	}
	if loose {
		packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*"))
		if err != nil || len(packs) == 0 {
			b.Fatalf("no pack: %v", err)
		}
		var pack []byte
		for _, p := range packs {
			if strings.HasSuffix(p, ".pack") {
				if pack, err = os.ReadFile(p); err != nil {
					b.Fatal(err)
				}
			}
			_ = os.Remove(p)
		}
		cmd := exec.Command("git", "unpack-objects", "-q")
		cmd.Dir, cmd.Env, cmd.Stdin = dir, gittest.Env(), bytes.NewReader(pack)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("unpack-objects: %v: %s", err, out)
		}
	}
	backendURL := httpBackend(b, dir)
	// A new Handler with an empty cache for each round.
	gitfleet := func() (url string, h *gitserve.Handler, stop func()) {
		c, err := gitserve.NewPackCache(filepath.Join(b.TempDir(), "packcache"), gitserve.CacheConfig{MaxBytes: 1 << 30, TTL: time.Minute}, nil)
		if err != nil {
			b.Fatal(err)
		}
		// Every clone comes from 127.0.0.1: no per-client cap.
		h = &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Resolve: func(repokey.Key) (string, bool) { return dir, true }, Cache: c,
			Limits: gitserve.Limits{MaxUploadPacks: 32, MaxPerRepo: 8, QueueWait: time.Minute, QueueLength: 128}}
		srv := httptest.NewServer(h)
		return srv.URL + "/example.com/history.git", h, srv.Close
	}
	url, _, stop := gitfleet()
	identicalClones(b, url, 1) // warm the page cache
	stop()
	identicalClones(b, backendURL, 1)
	var backendWall, backendCPU, oursWall, oursCPU time.Duration
	var runs int64
	b.ResetTimer()
	for i := range b.N {
		url, h, stop := gitfleet()
		if i%2 == 0 {
			w, c := identicalClones(b, backendURL, n)
			backendWall, backendCPU = backendWall+w, backendCPU+c
		}
		w, c := identicalClones(b, url, n)
		oursWall, oursCPU = oursWall+w, oursCPU+c
		if i%2 == 1 {
			w, c := identicalClones(b, backendURL, n)
			backendWall, backendCPU = backendWall+w, backendCPU+c
		}
		runs += h.Cache.Stats().Runs
		stop()
	}
	b.StopTimer()
	reportVersusBackend(b, backendWall, backendCPU, oursWall, oursCPU)
	b.ReportMetric(float64(runs)/float64(b.N), "gitfleet-runs/round")
}

// reportVersusBackend reports the CPU and wall time a round took of git
// http-backend and of gitfleet's Handler, and their ratios.
func reportVersusBackend(b *testing.B, backendWall, backendCPU, oursWall, oursCPU time.Duration) {
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(backendCPU), "backend-cpu-s")
	b.ReportMetric(per(oursCPU), "gitfleet-cpu-s")
	b.ReportMetric(oursCPU.Seconds()/backendCPU.Seconds(), "cpu-ratio")
	b.ReportMetric(per(backendWall), "backend-wall-s")
	b.ReportMetric(per(oursWall), "gitfleet-wall-s")
	b.ReportMetric(oursWall.Seconds()/backendWall.Seconds(), "wall-ratio")
}
