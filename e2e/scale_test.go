package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
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
// resident memory. This machine is shared and noisy: each iteration runs
// several rounds, each against cat-file timed just before it, and reports
// the median load and ratio, the worst ratio, and the largest peak. It
// also times a fresh process (dd) filling as much memory as the
// coordinator's peak: on a virtual machine, first touching memory can cost
// as much as reading the catalog, and that share of the load is the
// machine's, whatever the code does with it. Run it with -benchtime=1x;
// the catalog is generated under b.TempDir.
func BenchmarkCoordinatorColdLoad(b *testing.B) {
	entries, rounds := benchsize.Of(1000000, 1000), benchsize.Of(5, 1)
	cat := filepath.Join(b.TempDir(), "catalog")
	if out, err := exec.Command(binary, "catalog", "gen", "--repos", fmt.Sprint(entries), "--per-file", "1000", cat).CombinedOutput(); err != nil {
		b.Fatalf("gen: %v\n%s", err, out)
	}
	for n := 0; n < b.N; n++ {
		var loads, ratios, touches []float64
		var peak float64
		for range rounds {
			catfile := catFileTime(b, cat)
			load, rss := coldLoad(b, cat)
			loads = append(loads, load.Seconds())
			ratios = append(ratios, load.Seconds()/catfile.Seconds())
			touches = append(touches, touchTime(b, int(rss)).Seconds()/catfile.Seconds())
			peak = max(peak, rss)
		}
		b.ReportMetric(median(loads), "load_s")
		b.ReportMetric(median(ratios), "x_catfile")
		b.ReportMetric(slices.Max(ratios), "x_catfile_max")
		b.ReportMetric(median(touches), "touch_x_catfile")
		b.ReportMetric(peak, "peak_rss_MiB")
	}
}

// catFileTime is the floor of a cold load: git alone reading every blob
// of the catalog's commit, the median of three runs.
func catFileTime(b *testing.B, cat string) time.Duration {
	script := "git -C " + cat + " ls-tree -r HEAD | awk '{print $3}' | git -C " + cat + " cat-file --batch > /dev/null"
	var runs []float64
	for range 3 {
		t0 := time.Now()
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			b.Fatalf("cat-file: %v\n%s", err, out)
		}
		runs = append(runs, time.Since(t0).Seconds())
	}
	return time.Duration(median(runs) * float64(time.Second))
}

// touchTime is how long a fresh process takes to fill mib MiB of memory it
// has just allocated (dd reading /dev/zero into one buffer), the median of
// three runs.
func touchTime(b *testing.B, mib int) time.Duration {
	var runs []float64
	for range 3 {
		t0 := time.Now()
		if out, err := exec.Command("dd", "if=/dev/zero", "of=/dev/null", fmt.Sprintf("bs=%dM", mib), "count=1").CombinedOutput(); err != nil {
			b.Fatalf("dd: %v\n%s", err, out)
		}
		runs = append(runs, time.Since(t0).Seconds())
	}
	return time.Duration(median(runs) * float64(time.Second))
}

// coldLoad starts a coordinator on cat and returns how long its first
// load took, by its own log, and its peak resident memory in MiB.
func coldLoad(b *testing.B, cat string) (time.Duration, float64) {
	p := start(b, "coordinator", "coordinator", "--data", b.TempDir(), "--catalog", cat, "--grpc", freeAddr(b),
		"--join-token", "x", "--warmup", "1h")
	defer p.stop()
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
	// took_ms: from the fetched commit to every key placed (read, parse,
	// normalise, index, place); the clone of the catalog repository itself
	// is not counted.
	log, _ := os.ReadFile(p.log)
	_, after, _ := strings.Cut(string(log), `msg="catalog applied"`)
	_, tookStr, _ := strings.Cut(after, "took_ms=")
	tookStr, _, _ = strings.Cut(tookStr, "\n")
	tookMs, err := strconv.Atoi(strings.TrimSpace(tookStr))
	if err != nil {
		b.Fatalf("no took_ms in %q", after)
	}
	rss, err := peakRSS(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(tookMs) * time.Millisecond, rss
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
