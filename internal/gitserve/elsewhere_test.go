package gitserve_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// relayed is a Handler that holds nothing and relays example.com/r to the
// fixture's Handler (the node that holds it), with a share of one request
// a client and no wait.
func relayed(t *testing.T, f *fixture) string {
	holder, err := url.Parse(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(holder)
	proxy.FlushInterval = -1
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Limits: gitserve.Limits{MaxPerClient: 1},
		Resolve: func(repokey.Key) (string, bool) { return "", false },
		Relay: func(key repokey.Key) http.Handler {
			if key != "example.com/r" {
				return nil
			}
			return proxy
		}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A repository held elsewhere is served through the relay, a clone and a
// fetch in protocol v2 and v0; one the relay has no holder for is a 404.
func TestARepositoryHeldElsewhereIsClonedAndFetchedThroughTheRelay(t *testing.T) {
	f := newFixture(t, nil)
	base := relayed(t, f)
	for _, proto := range []string{"2", "0"} {
		dir := filepath.Join(t.TempDir(), "c")
		if _, err := git(t, "", "-c", "protocol.version="+proto, "clone", "-q", base+"/example.com/r.git", dir); err != nil {
			t.Fatalf("v%s clone through the relay: %v", proto, err)
		}
		if _, err := git(t, dir, "fsck", "--full", "--strict"); err != nil {
			t.Fatalf("v%s clone through the relay is broken: %v", proto, err)
		}
		newID, err := f.up.Commit("r", "main")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := git(t, dir, "-c", "protocol.version="+proto, "fetch", "-q", "origin"); err != nil {
			t.Fatalf("v%s fetch through the relay: %v", proto, err)
		}
		if got, _ := git(t, dir, "rev-parse", "origin/main"); strings.TrimSpace(got) != newID {
			t.Fatalf("v%s fetch through the relay: origin/main is %q, want %s", proto, got, newID)
		}
	}
	resp, err := http.Get(base + "/example.com/other.git/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a repository with no holder: %s, want 404", resp.Status)
	}
}

// A relayed request holds its client's share while its answer streams: a
// second request of the same client waits its turn (here none: 429 with
// Retry-After at once), as it would for a run served here. A malformed
// request is refused here, never relayed.
func TestARelayedRequestHoldsItsClientsShare(t *testing.T) {
	f := newFixture(t, nil)
	base := relayed(t, f)
	reached, release := make(chan struct{}), make(chan struct{})
	f.onPost = func([]byte) {
		f.mu.Lock()
		f.onPost = nil // the first post only
		f.mu.Unlock()
		close(reached)
		<-release
	}
	post := func(body string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, base+"/example.com/r.git/git-upload-pack", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		req.Header.Set("Git-Protocol", "version=2")
		return http.DefaultClient.Do(req)
	}
	lsRefs := pkt("command=ls-refs\n") + "0001" + pkt("peel\n") + "0000"
	first := make(chan int, 1)
	go func() {
		resp, err := post(lsRefs)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	select {
	case <-reached:
	case s := <-first:
		t.Fatalf("the first request ended (%d) before it reached the holder", s)
	}
	resp, err := post(lsRefs)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a second request while the first is relayed: %s (Retry-After %q), want 429 with Retry-After",
			resp.Status, resp.Header.Get("Retry-After"))
	}
	close(release)
	if s := <-first; s != http.StatusOK {
		t.Fatalf("the relayed request: %d, want 200", s)
	}

	resp, err = post(pkt("command=receive-pack\n") + "0000")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.mu.Lock()
	posts := len(f.posts)
	f.mu.Unlock()
	if resp.StatusCode/100 != 4 || posts != 1 {
		t.Fatalf("a malformed request: %s, %d posts reached the holder; want 4xx and 1", resp.Status, posts)
	}
}
