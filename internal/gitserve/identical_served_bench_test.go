package gitserve_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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

// BenchmarkIdenticalFetchesServed measures what the server spends on 8
// identical clones, without the clients' own work: BenchmarkIdenticalClones
// runs 8 stock clones on the same 2 cores as the server, and their
// index-pack (the same for both servers) sets most of the wall time. Here
// the fetch request of a real clone (protocol v2) is recorded once and
// sent 8 times at once; each client reads the answer to its end and drops
// it. The wall time is the server's: from the requests to the last byte
// of the last answer. One run compares git http-backend and the Handler
// with its pack cache, on the same repository (packed without a bitmap, as
// BenchmarkIdenticalClones).
func BenchmarkIdenticalFetchesServed(b *testing.B) {
	const n = 8
	dir := synthHistory(b, benchsize.Of(200, 20), benchsize.Of(1000, 60))
	if err := gittest.Git(dir, "-c", "repack.writeBitmaps=false", "repack", "-a", "-d", "-f", "-q"); err != nil {
		b.Fatal(err)
	}
	backendURL := httpBackend(b, dir)
	backendHost, _, _ := strings.Cut(strings.TrimPrefix(backendURL, "http://"), "/")

	// Record the fetch request of one stock clone.
	var mu sync.Mutex
	var body []byte
	var header http.Header
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			data, _ := io.ReadAll(r.Body)
			if bytes.Contains(data, []byte("command=fetch")) {
				mu.Lock()
				body, header = data, r.Header.Clone()
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
		}
		u := *r.URL
		r2 := r.Clone(r.Context())
		r2.URL, r2.RequestURI = &u, ""
		r2.URL.Scheme, r2.URL.Host = "http", backendHost
		resp, err := http.DefaultTransport.RoundTrip(r2)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer rec.Close()
	if err := gittest.Git("", "-c", "protocol.version=2", "clone", "-q", "--bare", rec.URL+"/"+filepath.Base(dir), filepath.Join(b.TempDir(), "c.git")); err != nil {
		b.Fatal(err)
	}
	if body == nil {
		b.Fatal("no fetch request recorded")
	}

	gitfleet := func() (url string, h *gitserve.Handler, stop func()) {
		c, err := gitserve.NewPackCache(filepath.Join(b.TempDir(), "packcache"), gitserve.CacheConfig{MaxBytes: 1 << 30, TTL: time.Minute}, nil)
		if err != nil {
			b.Fatal(err)
		}
		h = &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Resolve: func(repokey.Key) (string, bool) { return dir, true }, Cache: c,
			Limits: gitserve.Limits{MaxUploadPacks: 32, MaxPerRepo: 8, QueueWait: time.Minute, QueueLength: 128}}
		srv := httptest.NewServer(h)
		return srv.URL + "/example.com/history.git", h, srv.Close
	}
	fetches := func(url string) (wall, cpu time.Duration, size int64) {
		children, self := rusage(syscall.RUSAGE_CHILDREN), rusage(syscall.RUSAGE_SELF)
		start := time.Now()
		var wg sync.WaitGroup
		sizes := make([]int64, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				req, err := http.NewRequest(http.MethodPost, url+"/git-upload-pack", bytes.NewReader(body))
				if err != nil {
					errs[i] = err
					return
				}
				for _, k := range []string{"Content-Type", "Accept", "Git-Protocol", "Content-Encoding"} {
					if v := header.Get(k); v != "" {
						req.Header.Set(k, v)
					}
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs[i] = fmt.Errorf("%s: %s", url, resp.Status)
					return
				}
				sizes[i], errs[i] = io.Copy(io.Discard, resp.Body)
			})
		}
		wg.Wait()
		wall = time.Since(start)
		for i, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
			if sizes[i] < int64(benchsize.Of(1<<20, 1<<10)) { // a pack, not an error's text
				b.Fatalf("answer %d is %d bytes: not a pack", i, sizes[i])
			}
		}
		return wall, rusage(syscall.RUSAGE_CHILDREN) - children + rusage(syscall.RUSAGE_SELF) - self, sizes[0]
	}
	url, _, stop := gitfleet()
	fetches(url) // warm the page cache
	stop()
	fetches(backendURL)
	var backendWall, backendCPU, oursWall, oursCPU time.Duration
	var size int64
	b.ResetTimer()
	for i := range b.N {
		url, _, stop := gitfleet()
		if i%2 == 0 {
			w, c, _ := fetches(backendURL)
			backendWall, backendCPU = backendWall+w, backendCPU+c
		}
		w, c, sz := fetches(url)
		oursWall, oursCPU, size = oursWall+w, oursCPU+c, sz
		if i%2 == 1 {
			w, c, _ := fetches(backendURL)
			backendWall, backendCPU = backendWall+w, backendCPU+c
		}
		stop()
	}
	b.StopTimer()
	reportVersusBackend(b, backendWall, backendCPU, oursWall, oursCPU)
	b.ReportMetric(float64(size)/(1<<20), "MiB/answer")
}
