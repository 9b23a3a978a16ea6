package gitserve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// synthRepo makes a bare repository of about mb MiB of incompressible
// blobs (one MiB each, in commits of ten) with fast-import.
func synthRepo(b *testing.B, mb int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "big.git")
	if err := gittest.Git("", "init", "-q", "--bare", "-b", "main", dir); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = gittest.Env()
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(in)
	rng := rand.NewChaCha8([32]byte{1})
	blob := make([]byte, 1<<20)
	for i := range mb {
		_, _ = rng.Read(blob)
		fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n", i+1, len(blob))
		_, _ = w.Write(blob)
		w.WriteString("\n")
	}
	for c := 0; c*10 < mb; c++ {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter bench <b@gitfleet.invalid> %d +0000\ndata 7\ncommit\n", 1700000000+c)
		for i := c * 10; i < min(mb, c*10+10); i++ {
			fmt.Fprintf(w, "M 100644 :%d f%03d\n", i+1, i)
		}
		w.WriteString("\n")
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// streamingHandler is how the mirror served git before its requests were
// checked: the body streamed into upload-pack, no bounds but its size. It
// is the baseline of BenchmarkClone100MiB.
func streamingHandler(git *gitcmd.Runner, dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cmd := gitcmd.Cmd{Name: "upload-pack", Args: []string{dir}, Env: []string{"GIT_PROTOCOL=version=2"},
			Config: []string{"uploadpack.allowFilter=true"}, Stdout: flushWriter{w}}
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
			cmd.Flags = []string{"--stateless-rpc", "--advertise-refs"}
		} else {
			w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
			cmd.Flags = []string{"--stateless-rpc"}
			cmd.Stdin = http.MaxBytesReader(w, r.Body, 64<<20)
		}
		if err := git.Run(r.Context(), cmd); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

// flushWriter flushes every write, as the Handler does.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.w.(http.Flusher).Flush()
	return n, err
}

// BenchmarkClone100MiB clones a 100 MiB repository with stock git (protocol
// v2) from the Handler and from the streaming baseline, twice each per
// round in one run, and reports both times and their ratio. Run it with
// -benchtime 3x.
func BenchmarkClone100MiB(b *testing.B) {
	dir := synthRepo(b, benchsize.Of(100, 2))
	git := gitcmd.New(gitcmd.Direct(), gitcmd.Options{})
	checked := httptest.NewServer(&gitserve.Handler{Git: git, Resolve: func(repokey.Key) (string, bool) { return dir, true },
		Limits: gitserve.Limits{MaxUploadPacks: 32, MaxPerClient: 4}})
	defer checked.Close()
	baseline := httptest.NewServer(streamingHandler(git, dir))
	defer baseline.Close()
	clone := func(base string) time.Duration {
		out := filepath.Join(b.TempDir(), "c.git")
		start := time.Now()
		cmd := exec.CommandContext(context.Background(), "git", "-c", "protocol.version=2", "clone", "-q", "--bare", base+"/example.com/big.git", out)
		cmd.Env = gittest.Env()
		cmd.Stderr = io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatalf("clone from %s: %v", base, err)
		}
		d := time.Since(start)
		_ = os.RemoveAll(out)
		return d
	}
	clone(checked.URL) // warm the page cache
	var before, after time.Duration
	b.ResetTimer()
	for range b.N {
		// Both orders in each round: a clone slows the one after it (its
		// pack is still being written back), whichever server that is.
		before += clone(baseline.URL)
		after += clone(checked.URL)
		after += clone(checked.URL)
		before += clone(baseline.URL)
	}
	b.ReportMetric(before.Seconds()/float64(2*b.N), "before-s/clone")
	b.ReportMetric(after.Seconds()/float64(2*b.N), "after-s/clone")
	b.ReportMetric(after.Seconds()/before.Seconds(), "after/before")
}
