package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// rss reads a process's resident memory now (VmRSS) in MiB.
func rss(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// millionRepos is the size of BenchmarkMillion: GITFLEET_BENCH_REPOS, or a
// million (1,000 under -short).
func millionRepos(b *testing.B) int {
	n := benchsize.Of(1000000, 1000)
	if s := os.Getenv("GITFLEET_BENCH_REPOS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1000 {
			b.Fatalf("GITFLEET_BENCH_REPOS=%q: want a number of at least 1000", s)
		}
		n = v
	}
	return n
}

// BenchmarkMillion runs `gitfleet up` (coordinator, full node and its own
// fetching in one process, as a single-machine mirror runs) on a catalog of
// GITFLEET_BENCH_REPOS (default 1,000,000) generated entries, whose hosts
// this machine cannot reach (their checks fail, as in an offline
// measurement), plus 5 real repositories on a local git server that it
// mirrors. It reports the start-up time (process start until the API
// lists every repository, and until the real ones, asked for on demand,
// are served), the peak and
// steady resident memory, and the median time of each public request
// (with the answer's size), 7 requests each. Run it with -benchtime 1x;
// the catalog is generated under b.TempDir, which the run removes.
func BenchmarkMillion(b *testing.B) {
	n := millionRepos(b)
	cat := filepath.Join(b.TempDir(), "catalog")
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	const real = 5
	var realURLs []string
	for i := range real {
		name := fmt.Sprintf("real/repo-%d", i)
		if err := up.Create(name, []string{"main", "dev"}, []string{"v1"}); err != nil {
			b.Fatal(err)
		}
		realURLs = append(realURLs, up.RepoURL(name))
	}
	if out, err := exec.Command(binary, "catalog", "gen", "--repos", fmt.Sprint(n), "--per-file", "1000", cat).CombinedOutput(); err != nil {
		b.Fatalf("gen: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(cat, "real.list"), []byte(strings.Join(realURLs, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := gittest.Git(cat, "add", "-A"); err != nil {
		b.Fatal(err)
	}
	if err := gittest.Git(cat, "commit", "-q", "-m", "real repositories"); err != nil {
		b.Fatal(err)
	}
	realKey := strings.TrimSuffix(strings.TrimPrefix(realURLs[0], "http://"), ".git")

	for it := 0; it < b.N; it++ {
		addr := freeAddr(b)
		base := "http://" + addr
		began := time.Now()
		p := start(b, "up", "up", "--data", filepath.Join(b.TempDir(), "up"), "--catalog", cat,
			"--http", addr, "--grpc", freeAddr(b), "--tunnel", freeAddr(b), "--join-token", "bench-join-token",
			"--api-token", apiToken, "--allow-private-upstreams", "--max-interval", "24h", "--fetchers", "2",
			"--log-level", "warn")
		pid := p.cmd.Process.Pid
		var peakDuring float64
		eventually(b, 20*time.Minute, "every repository listed, the real ones served", func() error {
			if r, err := rss(pid); err == nil {
				peakDuring = max(peakDuring, r)
			}
			var page struct {
				Total int `json:"total"`
			}
			if err := getJSON(base+"/api/v1/repos?limit=1", &page); err != nil {
				return err
			}
			if page.Total < n+real {
				return fmt.Errorf("the API lists %d of %d repositories", page.Total, n+real)
			}
			return nil
		})
		listed := time.Since(began)
		// Every repository is a first clone, queued in the urgent lane; the
		// real ones are asked for, as a user would, and go ahead of them.
		for _, u := range realURLs {
			key := strings.TrimSuffix(strings.TrimPrefix(u, "http://"), ".git")
			var tk task
			if code := call(b, "POST", base+"/api/v1/repos/"+key+"/fetch?wait=120s", apiToken, nil, &tk); code != 200 || tk.State != "done" {
				l, _ := os.ReadFile(p.log)
				b.Fatalf("on-demand fetch of %s: %d %+v; the end of the log:\n%s", key, code, tk, l[max(0, len(l)-8<<10):])
			}
			if _, err := lsRemote(base + "/" + strings.TrimPrefix(u, "http://")); err != nil {
				b.Fatal(err)
			}
		}
		startup := time.Since(began)
		b.ReportMetric(listed.Seconds(), "listed_s")
		time.Sleep(benchsize.Of(30*time.Second, time.Second)) // steady: the first persists done, checks going on
		steady, err := rss(pid)
		if err != nil {
			b.Fatal(err)
		}
		paths := []string{
			"/metrics",
			"/api/v1/repos?limit=50",
			"/api/v1/repos?state=failing&limit=50",
			"/api/v1/repos?prefix=github.com/group-0500/&limit=50",
			"/api/v1/repos/" + realKey,
			"/api/v1/nodes",
			"/api/v1/catalog",
			"/",
			"/-/repos?q=repo-0999",
			"/-/repos?state=failing",
		}
		for _, path := range paths {
			med, size, code := timeGet(b, base+path)
			b.Logf("GET %-55s %3d %8d bytes  median %v", path, code, size, med.Round(10*time.Microsecond))
			if code == http.StatusOK {
				b.ReportMetric(float64(med.Microseconds())/1000, "ms:"+metricName(path))
			}
		}
		peak, err := peakRSS(pid)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(startup.Seconds(), "startup_s")
		b.ReportMetric(peak, "peak_rss_MiB")
		b.ReportMetric(steady, "steady_rss_MiB")
		b.ReportMetric(steady*1024*1024/float64(n+real), "steady_B/repo")
		b.Logf("%d repositories: start-up %v, peak RSS %.0f MiB, steady RSS %.0f MiB (%.0f bytes a repository)",
			n+real, startup.Round(100*time.Millisecond), peak, steady, steady*1024*1024/float64(n+real))
		p.stop()
	}
}

// metricName turns a request path into a benchmark unit.
func metricName(path string) string {
	r := strings.NewReplacer("/api/v1/", "", "?", "_", "&", "_", "=", "-", "/", ".")
	s := strings.Trim(r.Replace(path), ".")
	if s == "" {
		s = "overview"
	}
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// timeGet requests url 7 times and returns the median time, the size of
// the answer and its status.
func timeGet(b *testing.B, url string) (time.Duration, int, int) {
	var times []float64
	size, code := 0, 0
	for range 7 {
		t0 := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		times = append(times, time.Since(t0).Seconds())
		size, code = len(body), resp.StatusCode
	}
	slices.Sort(times)
	return time.Duration(times[len(times)/2] * float64(time.Second)), size, code
}

func getJSON(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
