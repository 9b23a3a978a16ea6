package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// `gitfleet up` alone is a complete mirror: coordinator and full node in
// one process, fetching every repository itself.
func TestUpIsACompleteMirrorOnOneMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 6)
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main", "dev"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(repos, "6 repositories")
	start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms")
	eventually(t, 60*time.Second, "all served by gitfleet up", func() error { return f.servedLikeUpstream(repos) })
	if _, err := f.up.Commit(f.name(2), "dev"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a push reaches the mirror", func() error { return f.servedLikeUpstream(repos) })
}

// Clone slots are leases: upstreams that are down fail their first clone
// and free their slots, so that with --max-clones-in-flight 3 and ten
// dead upstreams a healthy repository added later is mirrored at once,
// not after the dead ones' retries.
func TestDeadUpstreamsDoNotHoldTheCloneSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	dead := freeAddr(t) // nothing listens there: each clone fails at once
	var list strings.Builder
	for i := range 10 {
		fmt.Fprintf(&list, "http://%s/dead/r%d.git\n", dead, i)
	}
	f.writeCatalog(nil, "no live repositories")
	f.writeFile("lists/dead.list", list.String())
	if err := gittest.Git(f.catalog, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.catalog, "commit", "-q", "-m", "ten dead upstreams"); err != nil {
		t.Fatal(err)
	}
	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		// --max-interval an hour: a failed clone is retried after a backoff
		// of 30 s to a minute, not within seconds.
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "1h", "--min-interval", "500ms",
		"--max-clones-in-flight", "3")
	eventually(t, 60*time.Second, "every dead upstream tried", func() error {
		if n := up.count("/dead/r"); n < 10 {
			return fmt.Errorf("%d log lines name a dead upstream", n)
		}
		for i := range 10 {
			if !strings.Contains(readLog(up), fmt.Sprintf("/dead/r%d class=", i)) {
				return fmt.Errorf("dead/r%d not tried yet", i)
			}
		}
		return nil
	})

	if err := f.up.Create(f.name(0), []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	f.writeFile("lists/live.list", f.up.RepoURL(f.name(0))+"\n")
	if err := gittest.Git(f.catalog, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.catalog, "commit", "-q", "-m", "a healthy repository"); err != nil {
		t.Fatal(err)
	}
	// The healthy one must not wait for a slot until the dead ones retry:
	// it is served before any of them is tried a second time.
	eventually(t, 90*time.Second, "the healthy repository served", func() error { return f.servedLikeUpstream([]int{0}) })
	log := readLog(up)
	for i := range 10 {
		if n := strings.Count(log, fmt.Sprintf("/dead/r%d class=", i)); n != 1 {
			t.Errorf("dead/r%d was tried %d times before the healthy repository was served, want once", i, n)
		}
	}
}

// A stock clone through `gitfleet up`, whose refs advertisement and ref
// listing are written without git (issue 35), gets the refs as the
// upstream advertises them, peeled tags and HEAD's branch included, in
// protocol v0 and v2, and a blob:none clone works.
func TestAStockCloneThroughUpGetsTheRefsAsTheUpstreamAdvertisesThem(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	if err := f.up.Create(f.name(0), []string{"main", "dev"}, []string{"v1", "v2"}); err != nil {
		t.Fatal(err)
	}
	f.writeCatalog([]int{0}, "1 repository")
	start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms")
	eventually(t, 60*time.Second, "served by gitfleet up", func() error { return f.servedLikeUpstream([]int{0}) })
	url := f.base + "/" + f.key(0) + ".git"
	for _, version := range []string{"0", "2"} {
		lsRemote := func(url string) string {
			out, err := gittest.Output("", "-c", "protocol.version="+version, "ls-remote", "--symref", url)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		if got, want := lsRemote(url), lsRemote(f.up.RepoURL(f.name(0))); got != want {
			t.Errorf("protocol v%s: gitfleet up advertises\n%s\nthe upstream\n%s", version, got, want)
		}
		dst := filepath.Join(t.TempDir(), "clone")
		if err := gittest.Git("", "-c", "protocol.version="+version, "clone", "-q", url, dst); err != nil {
			t.Fatal(err)
		}
		if branch, err := gittest.Output(dst, "symbolic-ref", "--short", "HEAD"); err != nil || strings.TrimSpace(branch) != "main" {
			t.Errorf("protocol v%s: the clone is on %q (%v), want main", version, branch, err)
		}
	}
	dst := filepath.Join(t.TempDir(), "partial")
	if err := gittest.Git("", "-c", "protocol.version=2", "clone", "-q", "--filter=blob:none", url, dst); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(dst, "fsck", "--strict"); err != nil {
		t.Fatal(err)
	}
}
