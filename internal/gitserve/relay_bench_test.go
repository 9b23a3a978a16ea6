package gitserve_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// BenchmarkRelayTLS measures what relaying a kept answer costs the server
// over plain HTTP, where it goes from the cache's file to the socket by
// sendfile, and over TLS, which must read, encrypt and write every byte:
// 8 concurrent clients (curl, out of this process) fetch the answer of a
// stock clone's fetch request from one Handler behind both listeners, in
// one run. It runs on the synthetic history and on GITFLEET_BENCH_REPO's
// repository. Run it with -benchtime 2x (both orders).
func BenchmarkRelayTLS(b *testing.B) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		b.Skip("no curl to fetch with")
	}
	repos := []struct{ name, dir string }{{"synthetic", ""}}
	if dir := os.Getenv(benchRepoEnv); dir != "" {
		repos = append(repos, struct{ name, dir string }{"real", dir})
	}
	for _, repo := range repos {
		b.Run(repo.name, func(b *testing.B) { benchRelayTLS(b, curl, newFloorBench(b, repo.dir)) })
	}
}

func benchRelayTLS(b *testing.B, curl string, fb *floorBench) {
	_, h, stop := fb.gitfleet(b)
	defer stop()
	var mu sync.Mutex
	var body []byte
	var header http.Header
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			data, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(data))
			mu.Lock()
			body, header = data, r.Header.Clone() // the clone's last request is its fetch
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	defer plain.Close()
	tls := httptest.NewTLSServer(h)
	defer tls.Close()
	clones(b, b.TempDir(), plain.URL+"/example.com/r.git", 1) // keeps the answer
	if s := h.Cache.Stats(); s.Runs != 1 || s.Entries != 1 {
		b.Fatalf("the clone's answer is not kept: %+v", s)
	}
	reqFile := filepath.Join(b.TempDir(), "request")
	if err := os.WriteFile(reqFile, body, 0o600); err != nil {
		b.Fatal(err)
	}
	args := []string{"-sS", "--fail", "--http1.1", "-k", "-o", "/dev/null", "--data-binary", "@" + reqFile,
		"-H", "Content-Type: application/x-git-upload-pack-request"}
	for _, k := range []string{"Git-Protocol", "Content-Encoding"} {
		if v := header.Get(k); v != "" {
			args = append(args, "-H", k+": "+v)
		}
	}
	fetches := func(base string) time.Duration {
		var mu sync.Mutex
		var cpu time.Duration
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				cmd := exec.Command(curl, append(args, base+"/example.com/r.git/git-upload-pack")...)
				cmd.Env = gittest.Env()
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Errorf("curl %s: %v: %s", base, err, out)
				}
				mu.Lock()
				cpu += cloneCPU(cmd.ProcessState)
				mu.Unlock()
			})
		}
		wg.Wait()
		return cpu
	}
	fetches(plain.URL)
	fetches(tls.URL)
	var overPlain, overTLS cost
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			overPlain.add(serverCost(b, func(string) time.Duration { return fetches(plain.URL) }))
		}
		overTLS.add(serverCost(b, func(string) time.Duration { return fetches(tls.URL) }))
		if i%2 == 1 {
			overPlain.add(serverCost(b, func(string) time.Duration { return fetches(plain.URL) }))
		}
	}
	b.StopTimer()
	if s := h.Cache.Stats(); s.Runs != 1 {
		b.Fatalf("%d runs: the fetches were not all served from the kept answer", s.Runs)
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(overPlain.cpu()), "plain-cpu-s")
	b.ReportMetric(per(overTLS.cpu()), "tls-cpu-s")
	b.ReportMetric(overTLS.cpu().Seconds()/overPlain.cpu().Seconds(), "tls/plain")
	b.ReportMetric(per(overPlain.wall), "plain-wall-s")
	b.ReportMetric(per(overTLS.wall), "tls-wall-s")
	b.ReportMetric(float64(8*h.Cache.Stats().Bytes)/(1<<20), "MiB/round")
}
