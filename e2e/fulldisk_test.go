package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A full node whose own --disk-quota is full serves what fitted, shows the
// rest as not served with the class "disk full", does not retry them, and
// takes them once restarted with a larger quota.
func TestFullNodeDiskQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 6)
	f.seed(repos, "6 repositories")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	// A quota of one byte: the first mirror (which tells how big a mirror
	// is) fits, and then the disk is above its high water.
	full := []string{"--http", f.http, "--tunnel", f.tunnelAddr, "--capacity", "0"}
	f.startNode("full", "full", append(full, "--disk-quota", "1B")...)
	f.startNode("partial-1", "partial")

	var served, waiting []int
	eventually(t, 90*time.Second, "one repository served, the rest waiting for disk room", func() error {
		api, err := apiRepos(f.base)
		if err != nil {
			return err
		}
		served, waiting = nil, nil
		for _, i := range repos {
			r, ok := api[f.key(i)]
			switch {
			case !ok:
				return fmt.Errorf("%s not listed", f.key(i))
			case r.Served:
				served = append(served, i)
			case r.Error == "disk full":
				waiting = append(waiting, i)
			default:
				return fmt.Errorf("%s: neither served nor waiting for disk room: %+v", f.key(i), r)
			}
		}
		if len(served) != 1 {
			return fmt.Errorf("%d served, want 1", len(served))
		}
		return f.servedLikeUpstream(served)
	})
	metrics := func() (string, error) {
		resp, err := http.Get(f.base + "/metrics")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	m, err := metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gitfleet_full_disk_full 1", fmt.Sprintf("gitfleet_full_disk_waiting %d", len(waiting)),
		"gitfleet_full_disk_total_bytes 1\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	if _, err := lsRemote(f.base + "/" + f.key(waiting[0]) + ".git"); err == nil {
		t.Errorf("%s is served although the full node never pulled it", f.key(waiting[0]))
	}

	// No retry loop: while the partial node checks every 1-3 s and new
	// states reach the full node, the waiting repositories are not pulled,
	// nor put to the disk's gate again.
	p := f.procs["full"]
	attempts := func() int {
		b, _ := os.ReadFile(p.log)
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "pulling from owner") && !strings.Contains(line, "pull waits for disk room") {
				continue
			}
			for _, i := range waiting {
				if strings.Contains(line, f.key(i)+" ") || strings.HasSuffix(line, f.key(i)) {
					n++
				}
			}
		}
		return n
	}
	// The owner's digest of a repository, as the full node has it.
	digest := func(i int) (string, error) {
		var r struct {
			Digest string `json:"digest"`
		}
		if code := call(t, "GET", f.base+"/api/v1/repos/"+f.key(i), "", nil, &r); code != 200 {
			return "", fmt.Errorf("%s: %d", f.key(i), code)
		}
		return r.Digest, nil
	}
	before := attempts()
	old, err := digest(waiting[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.up.Commit(f.name(waiting[0]), "main"); err != nil {
		t.Fatal(err)
	}
	// The full node takes the owner's new state (and decides whether to
	// pull it at once), then settles every pull it decided on.
	eventually(t, 60*time.Second, "the owner's new state at the full node", func() error {
		d, err := digest(waiting[0])
		if err != nil || d == old {
			return fmt.Errorf("digest %q (%v), want another than %q", d, err, old)
		}
		return nil
	})
	eventually(t, 30*time.Second, "the full node's pull queue empty", func() error { return pullQueueEmpty(f.base) })
	if after := attempts(); after != before {
		t.Errorf("the full node tried %d pulls of repositories waiting for disk room", after-before)
	}
	if n := p.count("full node disk above its high water"); n != 1 {
		t.Errorf("the crossing of the high water was logged %d times, want once", n)
	}
	if p.count("pulling from owner") == 0 {
		t.Fatal("no pull attempt is logged at all: the count above proves nothing")
	}

	// Restarted with room, it takes them all.
	p.stop()
	f.startNode("full", "full", append(full, "--disk-quota", "1GiB")...)
	eventually(t, 90*time.Second, "all served after the quota is raised", func() error { return f.servedLikeUpstream(repos) })
	eventually(t, 30*time.Second, "the disk metrics show room", func() error {
		m, err := metrics()
		if err != nil {
			return err
		}
		if !strings.Contains(m, "gitfleet_full_disk_full 0") || !strings.Contains(m, "gitfleet_full_disk_waiting 0") {
			return fmt.Errorf("metrics:\n%s", m)
		}
		return nil
	})
}

// In `gitfleet up` the full node owns every repository and clones it from
// its upstream itself: above its disk's high water it clones nothing new,
// as it pulls nothing new in a fleet. The rest wait for room, shown as
// "disk full" and not served.
func TestUpClonesNothingNewAboveTheDiskHighWater(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 6)
	f.seed(repos, "6 repositories")
	// A quota of one byte: the first mirror (which tells how big a mirror
	// is) fits, and then the disk is above its high water.
	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms",
		"--disk-quota", "1B")
	eventually(t, 60*time.Second, "one repository served, the rest waiting for disk room", func() error {
		api, err := apiRepos(f.base)
		if err != nil {
			return err
		}
		var served []int
		for _, i := range repos {
			r, ok := api[f.key(i)]
			switch {
			case !ok:
				return fmt.Errorf("%s not listed", f.key(i))
			case r.Served:
				served = append(served, i)
			case r.Error != "disk full":
				return fmt.Errorf("%s: neither served nor waiting for disk room: %+v", f.key(i), r)
			}
		}
		if len(served) != 1 {
			return fmt.Errorf("%d served, want 1", len(served))
		}
		return f.servedLikeUpstream(served)
	})
	// A first mirror is served as soon as it is on disk, before its
	// maintenance ends and its clone is logged.
	eventually(t, 30*time.Second, "the first clone is logged", func() error {
		if up.count("cloned=true") == 0 {
			return errors.New("no clone logged yet")
		}
		return nil
	})
	if n := up.count("cloned=true"); n != 1 {
		t.Errorf("%d clones above the high water: want only the first, which measured a mirror", n-1)
	}
}
