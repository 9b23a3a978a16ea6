package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// logEntry is an entry of the fetch log as the API shows it.
type logEntry struct {
	ID          string   `json:"id"`
	Key         string   `json:"key"`
	At          string   `json:"at"`
	Kind        string   `json:"kind"`
	Node        uint32   `json:"node"`
	From        uint32   `json:"from"`
	Result      string   `json:"result"`
	Changed     bool     `json:"changed"`
	DurationMs  int64    `json:"duration_ms"`
	RefsChanged int      `json:"refs_changed"`
	Refs        []string `json:"refs"`
	ErrorClass  string   `json:"error_class"`
	Error       string   `json:"error"`
}

type logPage struct {
	Entries []logEntry `json:"entries"`
	Next    string     `json:"next"`
}

// repoLog reads key's whole fetch log from the full node, as the operator.
func (f *fleet) repoLog(t *testing.T, key string) []logEntry {
	t.Helper()
	var page logPage
	if code := call(t, "GET", f.base+"/api/v1/repos/"+key+"/log?limit=1000", apiToken, nil, &page); code != http.StatusOK {
		t.Fatalf("GET the log of %s: %d", key, code)
	}
	return page.Entries
}

// The fetch log of a repository is the same after every process of the
// fleet was restarted: the entries from before are all there, unchanged.
func TestFetchLogSurvivesARestartOfEveryProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 3)
	f.seed(repos, "3 repositories")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	full := []string{"--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--capacity", "0"}
	f.startNode("full", "full", full...)
	f.startNode("partial-1", "partial")
	eventually(t, 90*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	if _, err := f.up.Commit(f.name(1), "main"); err != nil {
		t.Fatal(err)
	}
	key := f.key(1)
	// A pull of the change, and checks the owner made, as the full node
	// learned of them.
	eventually(t, 60*time.Second, "the first pull, the pull of the change and the owner's checks in the log", func() error {
		if err := f.servedLikeUpstream([]int{1}); err != nil {
			return err
		}
		pulls, checked := 0, false
		for _, e := range f.repoLog(t, key) {
			if e.Kind == "pull" && e.Result == "ok" && slices.Contains(e.Refs, "refs/heads/main") && e.From != 0 {
				pulls++
			}
			checked = checked || e.Kind == "check" && e.Node != 0 && e.Node == ownerOf(f, key)
		}
		if pulls < 2 || !checked {
			return fmt.Errorf("%d pulls that moved main, owner's checks %v", pulls, checked)
		}
		return nil
	})
	before := f.repoLog(t, key)

	for _, name := range []string{"partial-1", "full", "coordinator"} {
		f.procs[name].stop()
	}
	f.startCoordinator()
	f.startNode("full", "full", full...)
	f.startNode("partial-1", "partial")
	eventually(t, 60*time.Second, "the full node knows the repository again", func() error {
		rs, err := apiRepos(f.base)
		if _, ok := rs[key]; !ok && err == nil {
			err = fmt.Errorf("%s not listed yet", key)
		}
		return err
	})
	after := f.repoLog(t, key)
	byID := map[string]logEntry{}
	for _, e := range after {
		byID[e.ID] = e
	}
	for _, e := range before {
		if got, ok := byID[e.ID]; !ok || fmt.Sprint(got) != fmt.Sprint(e) {
			t.Errorf("entry %+v\nafter the restarts: %+v (present %v)", e, got, ok)
		}
	}
	t.Logf("%d entries before the restarts, all kept; %d after", len(before), len(after))
}

func ownerOf(f *fleet, key string) uint32 {
	rs, err := apiRepos(f.base)
	if err != nil {
		return 0
	}
	return rs[key].Owner
}

// stallProxy stands in front of a git server: while stall is set, it holds
// every fetch (a POST to upload-pack that is not a ref listing) without
// answering, until the client goes; the rest passes through.
type stallProxy struct {
	upstream string
	stall    atomic.Bool
	held     atomic.Int32 // fetches being held now
	done     chan struct{}
	srv      *httptest.Server
}

func newStallProxy(t *testing.T, upstream string) *stallProxy {
	p := &stallProxy{upstream: upstream, done: make(chan struct{})}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	t.Cleanup(func() { close(p.done) }) // runs first: held requests end
	return p
}

func (p *stallProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	plain := body
	if r.Header.Get("Content-Encoding") == "gzip" {
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
			plain, _ = io.ReadAll(zr)
		}
	}
	if r.Method == http.MethodPost && p.stall.Load() && !bytes.Contains(plain, []byte("command=ls-refs")) {
		p.held.Add(1)
		defer p.held.Add(-1)
		select {
		case <-r.Context().Done():
		case <-p.done:
		}
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	maps.Copy(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// mirrorRefs lists the refs of a mirror on disk.
func mirrorRefs(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", dir, "for-each-ref").Output()
	if err != nil {
		t.Fatalf("refs of %s: %v", dir, err)
	}
	return string(out)
}

// An on-demand check of an upstream that stalls in the middle of the
// fetch is cancelled through the API: the owner's git processes end, the
// task says cancelled, and the mirror keeps the refs it had.
func TestCancellingAStalledFetchEndsItsGitAndLeavesTheMirrorAsItWas(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	f := newFleet(t)
	const name = "team/stalls"
	if err := f.up.Create(name, []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	proxy := newStallProxy(t, f.up.URL)
	url := proxy.srv.URL + "/" + name + ".git"
	key := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), ".git")
	f.writeFile("lists/stall.list", url+"\n")
	if err := gittest.Git("", "init", "-q", "-b", "main", f.catalog); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.catalog, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.catalog, "commit", "-q", "-m", "a repository behind a proxy that can stall"); err != nil {
		t.Fatal(err)
	}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	// No background checks after the first clone: only the on-demand one
	// reaches the upstream.
	quiet := []string{"--max-interval", "24h", "--min-interval", "24h"}
	f.startNode("full", "full", append([]string{"--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--capacity", "0"}, quiet...)...)
	partial := "partial-1"
	f.startNode(partial, "partial", quiet...)
	want, err := f.up.Refs(name)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the repository served", func() error {
		got, err := lsRemote(f.base + "/" + key + ".git")
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("served %v, want %v", got, want)
		}
		return nil
	})
	dir := filepath.Join(f.dataDirs[partial], "repos", filepath.FromSlash(key)+".git")
	refsBefore := mirrorRefs(t, dir)

	if _, err := f.up.Commit(name, "main"); err != nil {
		t.Fatal(err)
	}
	proxy.stall.Store(true)
	var tk task
	if code := call(t, "POST", f.base+"/api/v1/repos/"+key+"/fetch", apiToken, nil, &tk); code != http.StatusAccepted {
		t.Fatalf("fetch: %d %+v", code, tk)
	}
	host := strings.TrimPrefix(proxy.srv.URL, "http://")
	pid := f.procs[partial].cmd.Process.Pid
	var gits map[int]string
	eventually(t, 60*time.Second, "the fetch held by the stalling upstream", func() error {
		gits = map[int]string{}
		for p, cmd := range descendants(pid) {
			if strings.Contains(cmd, host) {
				gits[p] = cmd
			}
		}
		if proxy.held.Load() == 0 || len(gits) == 0 {
			return fmt.Errorf("%d fetches held, git processes naming the upstream: %v", proxy.held.Load(), gits)
		}
		return nil
	})

	var cancelled task
	start := time.Now()
	if code := call(t, "POST", f.base+"/api/v1/tasks/"+tk.ID+"/cancel", apiToken, nil, &cancelled); code != http.StatusOK || cancelled.State != "cancelled" {
		t.Fatalf("cancel: %d %+v", code, cancelled)
	}
	answered := time.Since(start)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []string
		for p, cmd := range gits {
			if alive(p) {
				left = append(left, cmd)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("git processes still running 30s after the cancel: %q", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("cancel answered in %v; the %d git processes of the fetch were gone %v after the request", answered.Round(time.Millisecond),
		len(gits), time.Since(start).Round(time.Millisecond))

	var got task
	call(t, "GET", f.base+"/api/v1/tasks/"+tk.ID, apiToken, nil, &got)
	if got.State != "cancelled" {
		t.Errorf("task %+v, want cancelled", got)
	}
	if refs := mirrorRefs(t, dir); refs != refsBefore {
		t.Errorf("the mirror's refs changed:\n%s\nwere:\n%s", refs, refsBefore)
	}
	eventually(t, 30*time.Second, "the owner's check logged as cancelled, its temporary files gone", func() error {
		for _, sub := range []string{"objects", "objects/pack"} {
			ents, _ := os.ReadDir(filepath.Join(dir, sub))
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "tmp_") || strings.HasPrefix(e.Name(), "incoming-") {
					return fmt.Errorf("%s/%s left in the mirror", sub, e.Name())
				}
			}
		}
		for _, e := range f.repoLog(t, key) {
			if e.Kind == "check" && e.Result == "cancelled" {
				return nil
			}
		}
		return fmt.Errorf("no cancelled check in the log")
	})
	// The upstream answers again: the next check fetches the change.
	proxy.stall.Store(false)
	var next task
	call(t, "POST", f.base+"/api/v1/repos/"+key+"/fetch", apiToken, nil, &next)
	eventually(t, 120*time.Second, "the check after the cancel done", func() error {
		call(t, "GET", f.base+"/api/v1/tasks/"+next.ID+"?wait=10s", apiToken, nil, &next)
		if next.State != "done" {
			return fmt.Errorf("task %+v", next)
		}
		return nil
	})
	if refs := mirrorRefs(t, dir); refs == refsBefore {
		t.Error("the check after the cancel did not fetch the change")
	}
}
