package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// A repository gets many small pushes, which the partial node fetches and
// the full node pulls, while both maintain their mirrors (settings low, so
// that runs are frequent, full ones too), and the public clones it all the
// while: every clone passes git fsck and holds a main that the upstream
// had, and the full node's mirror ends in one pack with a bitmap.
func TestMaintenanceWhileServing(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	f.seed([]int{0}, "one repository")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	const fullEvery = 8 * time.Second
	maint := []string{"--min-interval", "300ms", "--max-interval", "600ms",
		"--maintenance-duty", "0.5", "--maintenance-full-interval", fullEvery.String()}
	f.startNode("full", "full", append([]string{"--http", f.http, "--tunnel", f.tunnelAddr, "--capacity", "0"}, maint...)...)
	f.startNode("partial-1", "partial", maint...)
	eventually(t, 90*time.Second, "served", func() error { return f.servedLikeUpstream([]int{0}) })

	name, url := f.name(0), f.base+"/"+f.key(0)+".git"
	refs, err := f.up.Refs(name)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	pushed := map[string]bool{refs["refs/heads/main"]: true}
	done, stop := make(chan error, 1), make(chan struct{})
	stopPushing := sync.OnceFunc(func() { close(stop) })
	defer stopPushing()
	go func() { // small pushes, until the clones below have seen enough
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			tip, err := f.up.Commit(name, "main")
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			pushed[tip] = true
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()

	clones := 0
	deadline := time.Now().Add(3 * time.Minute)
	// The machine decides how many fetches a run finds (incremental runs
	// wait for 8 new packs: the unit tests in internal/mirror take that
	// path); full runs come every fullEvery.
	runs := func() float64 {
		return maintMetric(t, f.base, `gitfleet_maintenance_runs_total{kind="full"}`) +
			maintMetric(t, f.base, `gitfleet_maintenance_runs_total{kind="incremental"}`)
	}
	for clones < 10 || runs() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after %d clones: full node's maintenance runs: %v full, %v incremental", clones,
				maintMetric(t, f.base, `gitfleet_maintenance_runs_total{kind="full"}`),
				maintMetric(t, f.base, `gitfleet_maintenance_runs_total{kind="incremental"}`))
		}
		select {
		case err := <-done:
			t.Fatal(err)
		default:
		}
		dst := filepath.Join(t.TempDir(), "clone.git")
		if err := gittest.Git("", "clone", "-q", "--bare", url, dst); err != nil {
			t.Fatalf("clone %d while the mirror is fetched and maintained: %v", clones, err)
		}
		if err := gittest.Git("", "--git-dir="+dst, "fsck", "--strict", "--no-dangling"); err != nil {
			t.Fatalf("fsck of clone %d: %v", clones, err)
		}
		got, err := gittest.RefsOf(dst)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ok := pushed[got["refs/heads/main"]]
		mu.Unlock()
		if !ok {
			t.Fatalf("clone %d has main at %s, which the upstream never had", clones, got["refs/heads/main"])
		}
		_ = os.RemoveAll(dst)
		clones++
	}
	stopPushing()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.procs["partial-1"].count("mirror maintained") == 0 {
		t.Error("the partial node maintained nothing")
	}
	if n := f.procs["full"].count("maintenance of a mirror failed") + f.procs["partial-1"].count("maintenance of a mirror failed"); n > 0 {
		t.Errorf("%d maintenance runs failed", n)
	}
	eventually(t, 60*time.Second, "the last push served", func() error { return f.servedLikeUpstream([]int{0}) })

	// A pull once the full run's interval has passed makes the full node's
	// mirror a candidate due for a full run: it ends in one pack. (A push
	// every fullEvery, in case the last full run came between.)
	dir := filepath.Join(f.dataDir("full"), "repos", filepath.FromSlash(f.key(0))+".git")
	lastPush := time.Now()
	eventually(t, 120*time.Second, "the full node's mirror in one pack with a bitmap", func() error {
		if time.Since(lastPush) > fullEvery+time.Second {
			if _, err := f.up.Commit(name, "main"); err != nil {
				t.Fatal(err)
			}
			lastPush = time.Now()
		}
		if err := f.servedLikeUpstream([]int{0}); err != nil {
			return err
		}
		packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
		bitmaps, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.bitmap"))
		if len(packs) != 1 || len(bitmaps) != 1 {
			return fmt.Errorf("%d packs, %d bitmaps", len(packs), len(bitmaps))
		}
		return nil
	})
	if err := gittest.Git("", "--git-dir="+dir, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck of the full node's mirror: %v", err)
	}
	t.Logf("%d clones checked; full node: %v full and %v incremental runs, %v s", clones,
		maintMetric(t, f.base, `gitfleet_maintenance_runs_total{kind="full"}`),
		maintMetric(t, f.base, `gitfleet_maintenance_runs_total{kind="incremental"}`),
		maintMetric(t, f.base, `gitfleet_maintenance_seconds_total`))
}

// maintMetric reads one sample of the full node's /metrics (-1 when absent).
func maintMetric(t *testing.T, base, sample string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sample, err)
			}
			return n
		}
	}
	return -1
}
