package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// peakRSS reads a process's peak resident memory (VmHWM) in MiB.
func peakRSS(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM for pid %d", pid)
}

// BenchmarkCoordinatorColdLoad starts a real coordinator on a synthetic
// catalog of 1,000,000 entries in 1,000 files and reports how long the cold
// load (read, parse, normalise, index, place) took, its ratio to
// `git cat-file --batch` reading the same blobs, and the process's peak
// resident memory, with and without --memory-limit. Run it with
// -benchtime=1x; the catalog is generated once into the temporary directory.
func BenchmarkCoordinatorColdLoad(b *testing.B) {
	const entries = 1000000
	cat := filepath.Join(os.TempDir(), "gitfleet-bench-catalog-1m")
	if _, err := os.Stat(filepath.Join(cat, ".git")); err != nil {
		os.RemoveAll(cat)
		if out, err := exec.Command(binary, "catalog", "gen", "--repos", fmt.Sprint(entries), "--per-file", "1000", cat).CombinedOutput(); err != nil {
			b.Fatalf("gen: %v\n%s", err, out)
		}
	}
	// The floor: git alone reading every blob of the commit.
	t0 := time.Now()
	script := "git -C " + cat + " ls-tree -r HEAD | awk '{print $3}' | git -C " + cat + " cat-file --batch > /dev/null"
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		b.Fatalf("cat-file: %v\n%s", err, out)
	}
	catfile := time.Since(t0)
	for _, limit := range []string{"", "240MiB"} {
		name := "default"
		if limit != "" {
			name = "memory-limit=" + limit
		}
		b.Run(name, func(b *testing.B) {
			for n := 0; n < b.N; n++ {
				args := []string{"coordinator", "--data", b.TempDir(), "--catalog", cat, "--grpc", freeAddr(b),
					"--join-token", "x", "--warmup", "1h"}
				if limit != "" {
					args = append(args, "--memory-limit", limit)
				}
				p := start(b, "coordinator", args...)
				began := time.Now()
				for {
					log, _ := os.ReadFile(p.log)
					if strings.Contains(string(log), `msg="catalog applied"`) {
						break
					}
					if time.Since(began) > 2*time.Minute {
						b.Fatal("catalog not applied within 2 minutes")
					}
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(2 * time.Second) // the first persist and GC settle
				// took_ms: from the fetched commit to every key placed (read,
				// parse, normalise, index, place); the clone of the catalog
				// repository itself is not counted.
				log, _ := os.ReadFile(p.log)
				_, after, _ := strings.Cut(string(log), `msg="catalog applied"`)
				_, tookStr, _ := strings.Cut(after, "took_ms=")
				tookStr, _, _ = strings.Cut(tookStr, "\n")
				tookMs, err := strconv.Atoi(strings.TrimSpace(tookStr))
				if err != nil {
					b.Fatalf("no took_ms in %q", after)
				}
				load := time.Duration(tookMs) * time.Millisecond
				rss, err := peakRSS(p.cmd.Process.Pid)
				if err != nil {
					b.Fatal(err)
				}
				p.stop()
				b.ReportMetric(load.Seconds(), "load_s")
				b.ReportMetric(load.Seconds()/catfile.Seconds(), "x_catfile")
				b.ReportMetric(rss, "peak_rss_MiB")
			}
		})
	}
}
