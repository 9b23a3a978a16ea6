package fullnode

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A proxy into the tunnels that serves a real repository as a partial node
// would, behind requireProxySecret.
func proxyRig(t *testing.T) (f *Node, url string, leaked *bool) {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("r", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	secret := rand.Text()
	f = &Node{proxySecret: secret}
	leaked = new(bool)
	git := &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Resolve: func(repokey.Key) (string, bool) {
		return filepath.Join(up.Dir, "r.git"), true
	}}
	srv := httptest.NewServer(requireProxySecret(secret, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(proxySecretHeader) != "" {
			*leaked = true
		}
		git.ServeHTTP(w, r)
	})))
	t.Cleanup(srv.Close)
	return f, srv.URL + "/127.0.0.1/r.git", leaked
}

func TestProxyRefusesARequestWithoutTheSecret(t *testing.T) {
	_, url, _ := proxyRig(t)
	for _, h := range []string{"", "wrong"} {
		req, _ := http.NewRequest("GET", url+"/info/refs?service=git-upload-pack", nil)
		if h != "" {
			req.Header.Set(proxySecretHeader, h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("secret %q: status %d, want 403", h, resp.StatusCode)
		}
	}
}

func TestGitReachesTheProxyWithTheSecretFromItsEnvironment(t *testing.T) {
	f, url, leaked := proxyRig(t)
	git := gitcmd.New(gitcmd.Direct(), gitcmd.Options{})
	if _, err := git.LsRemote(context.Background(), url); err == nil {
		t.Fatal("git without the secret was let through")
	}
	out, err := git.Output(context.Background(), gitcmd.Cmd{Name: "ls-remote", Env: f.proxyEnv(), Args: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no refs through the proxy")
	}
	if *leaked {
		t.Fatal("the secret was passed on to the partial node")
	}
}
