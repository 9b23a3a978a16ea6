package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// servedHead is the branch the HEAD a git server offers for url names.
func servedHead(url string) (string, error) {
	out, err := exec.Command("git", "ls-remote", "--symref", "--", url, "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("ls-remote --symref %s: %w", url, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if target, ok := strings.CutPrefix(line, "ref: "); ok {
			head, _, _ := strings.Cut(target, "\t")
			return head, nil
		}
	}
	return "", fmt.Errorf("ls-remote --symref %s: no symref for HEAD in %q", url, out)
}

// switchHead points the upstream name's HEAD at branch: the default
// branch switched among existing branches, with no ref moving.
func (f *fleet) switchHead(name, branch string) {
	f.t.Helper()
	if err := gittest.Git("", "--git-dir="+filepath.Join(f.up.Dir, name+".git"), "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
		f.t.Fatal(err)
	}
}

// headLogEntry is a fetch log entry with HEAD's switch.
type headLogEntry struct {
	Kind string `json:"kind"`
	Node uint32 `json:"node"`
	Head *struct {
		Old string `json:"old"`
		New string `json:"new"`
	} `json:"head"`
}

// A default branch switched upstream among existing branches, no ref
// moving, is seen by the partial node that owns the repository within
// its --max-interval (3 s here), and served by the full node, which checks
// the switch against the upstream itself: clients see the new HEAD, an
// event tells of it, and the fetch log shows it.
func TestADefaultBranchSwitchWithNoRefMovingIsFollowed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	if err := f.up.Create(f.name(0), []string{"main", "dev"}, nil); err != nil {
		t.Fatal(err)
	}
	f.writeCatalog([]int{0}, "a repository with two branches")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--capacity", "0")
	f.startNode("partial-1", "partial")
	url := f.base + "/" + f.key(0) + ".git"
	eventually(t, 90*time.Second, "served", func() error { return f.servedLikeUpstream([]int{0}) })
	if h, err := servedHead(url); err != nil || h != "refs/heads/main" {
		t.Fatalf("served HEAD %q (%v), want refs/heads/main", h, err)
	}
	before, err := lsRemote(url)
	if err != nil {
		t.Fatal(err)
	}
	ev := subscribe(t, f.base)

	f.switchHead(f.name(0), "dev")
	switched := time.Now()
	eventually(t, 60*time.Second, "the new HEAD served", func() error {
		if h, err := servedHead(url); err != nil || h != "refs/heads/dev" {
			return fmt.Errorf("served HEAD %q (%v)", h, err)
		}
		return nil
	})
	t.Logf("the switch was served %v after it (--max-interval 3s)", time.Since(switched).Round(100*time.Millisecond))
	eventually(t, 10*time.Second, "the HEAD event", func() error { return ev.find(f.key(0), "HEAD", "refs/heads/dev") })
	if after, err := lsRemote(url); err != nil || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refs %v (%v), want them as they were: %v", after, err, before)
	}
	// The entry is written just after the mirror's HEAD moves, which a
	// clone may see first on a busy machine: it is waited for.
	eventually(t, 30*time.Second, "the fetch log entry of the switch", func() error {
		var page struct {
			Entries []headLogEntry `json:"entries"`
		}
		if code := call(t, "GET", f.base+"/api/v1/repos/"+f.key(0)+"/log?limit=1000", apiToken, nil, &page); code != http.StatusOK {
			return fmt.Errorf("GET the log: %d", code)
		}
		for _, e := range page.Entries {
			if e.Head != nil && e.Head.Old == "refs/heads/main" && e.Head.New == "refs/heads/dev" && e.Node == f.nodeID("full") {
				return nil
			}
		}
		return fmt.Errorf("no fetch log entry of the full node shows HEAD's switch: %+v", page.Entries)
	})
	if n := f.procs["full"].count("HEAD follows the upstream's default branch"); n == 0 {
		t.Fatal("the full node did not follow HEAD itself")
	}
}

// With background checks 12 hours apart, a default branch switched with no
// ref moving comes through the forge's feed at once: GitHub's
// defaultBranchRef names another branch than the owner's HEAD, and the
// owner is asked for an urgent check, which asks HEAD.
func TestAForgeFeedBringsADefaultBranchSwitchAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	if err := f.up.Create(f.name(0), []string{"main", "dev"}, nil); err != nil {
		t.Fatal(err)
	}
	gh := &githubAPI{pushed: map[string]time.Time{}, token: "test-token-1"}
	gh.push(f.name(0), time.Now().Add(-time.Hour))
	gh.setHead(f.name(0), "main")
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	f.writeCatalog([]int{0}, "a repository on a forge with a change feed")
	host := strings.TrimPrefix(f.up.URL, "http://")
	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--log-level", "debug",
		// Background checks 12 hours apart: only the feed can bring the switch in time.
		"--max-interval", "12h", "--min-interval", "2s", "--budget", "1",
		"--forge", host+"=github,api="+api.URL+"/api", "--forge-token", host+"="+gh.token, "--forge-min-ask-interval", "1s")
	url := f.base + "/" + f.key(0) + ".git"
	eventually(t, 60*time.Second, "served", func() error { return f.servedLikeUpstream([]int{0}) })
	if h, err := servedHead(url); err != nil || h != "refs/heads/main" {
		t.Fatalf("served HEAD %q (%v), want refs/heads/main", h, err)
	}

	f.switchHead(f.name(0), "dev")
	gh.setHead(f.name(0), "dev")
	switched := time.Now()
	eventually(t, 60*time.Second, "the new HEAD served", func() error {
		if h, err := servedHead(url); err != nil || h != "refs/heads/dev" {
			return fmt.Errorf("served HEAD %q (%v)", h, err)
		}
		return nil
	})
	t.Logf("the switch was served %v after it (--max-interval 12h)", time.Since(switched).Round(100*time.Millisecond))
	if up.count("forge feed: the default branch switched") == 0 {
		t.Fatal("the switch did not come through the feed")
	}
}

// takedown is an upstream's front that answers HTTP 451 to everything
// once blocked, as a host does after a legal takedown.
type takedown struct {
	blocked atomic.Bool
	proxy   http.Handler
}

func (d *takedown) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.blocked.Load() {
		http.Error(w, "Repository access blocked", http.StatusUnavailableForLegalReasons)
		return
	}
	d.proxy.ServeHTTP(w, r)
}

// Deleted, archived and legal repositories show their reasons and when
// they were first seen in the API: an upstream that answers 404 is
// deleted after five answers and still served (--retention), the forge's
// feed saying NOT_FOUND bringing the checks of a repository it covers; one the
// forge's API marks archived, whose git answers are fine, is archived and
// served; one that answers 451 is legal at once, and no longer served.
func TestGoneUpstreamsShowTheirReasons(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	for _, i := range []int{0, 1, 2} {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	target, err := url.Parse(f.up.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := &takedown{proxy: httputil.NewSingleHostReverseProxy(target)}
	fs := httptest.NewServer(front)
	t.Cleanup(fs.Close)
	gh := &githubAPI{pushed: map[string]time.Time{}, archived: map[string]bool{}, token: "test-token-1"}
	for _, i := range []int{0, 1} {
		gh.push(f.name(i), time.Now().Add(-time.Hour))
	}
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	f.writeCatalog([]int{0, 1}, "two repositories on a forge with a feed")
	legalURL := fs.URL + "/" + f.name(2) + ".git"
	f.writeFile("lists/front.list", legalURL+"\n")
	f.commitCatalog("and one behind a front that may answer 451")
	legalKey := strings.TrimSuffix(strings.TrimPrefix(legalURL, "http://"), ".git")
	host := strings.TrimPrefix(f.up.URL, "http://")
	start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--log-level", "debug",
		"--max-interval", "3s", "--min-interval", "1s", "--retention", "1h",
		"--forge", host+"=github,api="+api.URL+"/api", "--forge-token", host+"="+gh.token, "--forge-min-ask-interval", "1s")
	eventually(t, 60*time.Second, "served", func() error {
		if err := f.servedLikeUpstream([]int{0, 1}); err != nil {
			return err
		}
		_, err := lsRemote(f.base + "/" + legalKey + ".git")
		return err
	})

	// What each showed since before the change: the reason's first sight
	// is the start of the check that saw it, which may begin a little
	// before the change itself, so it is told apart from the state before
	// by its value, not by a clock of the test's.
	before, err := apiRepos(f.base)
	if err != nil {
		t.Fatal(err)
	}
	gh.mu.Lock()
	gh.archived[strings.ToLower(f.name(0))] = true
	delete(gh.pushed, strings.ToLower(f.name(1))) // the forge says NOT_FOUND
	gh.mu.Unlock()
	if err := os.RemoveAll(filepath.Join(f.up.Dir, f.name(1)+".git")); err != nil {
		t.Fatal(err)
	}
	front.blocked.Store(true)
	want := map[string]struct {
		state  string
		served bool
	}{f.key(0): {"archived", true}, f.key(1): {"deleted", true}, legalKey: {"legal", false}}
	var repos map[string]apiRepo
	eventually(t, 90*time.Second, "the reasons shown", func() error {
		var err error
		if repos, err = apiRepos(f.base); err != nil {
			return err
		}
		for key, w := range want {
			r := repos[key]
			if r.State != w.state || r.Served != w.served {
				return fmt.Errorf("%s: %s, served %v; want %s, served %v", key, r.State, r.Served, w.state, w.served)
			}
			at, err := time.Parse(time.RFC3339Nano, r.StateSince)
			if err != nil || r.StateSince == before[key].StateSince || at.After(time.Now()) {
				return fmt.Errorf("%s: state_since %q (%v), want the time of the new state, not %q", key, r.StateSince, err, before[key].StateSince)
			}
		}
		return nil
	})
	if r := repos[f.key(1)]; r.Class != "not found" {
		t.Errorf("the deleted repository's class is %q, want not found", r.Class)
	}
	if r := repos[legalKey]; r.Class != "unavailable for legal reasons" {
		t.Errorf("the legal repository's class is %q, want unavailable for legal reasons", r.Class)
	}
	// Served: the archived one and the deleted one (its last verified
	// state, for --retention); not the legal one.
	if err := f.servedLikeUpstream([]int{0}); err != nil {
		t.Fatal(err)
	}
	if refs, err := lsRemote(f.base + "/" + f.key(1) + ".git"); err != nil || len(refs) == 0 {
		t.Fatalf("the deleted repository is not served: %v %v", refs, err)
	}
	if refs, err := lsRemote(f.base + "/" + legalKey + ".git"); err == nil {
		t.Fatalf("the legal repository is still served: %v", refs)
	}
}
