package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// mover is a git server's front for a repository that moves: once moved,
// the old path's requests are redirected to the new one, as GitHub's and
// GitLab's git servers answer a renamed repository's old path (301 with
// the new path's info/refs), and the new path is served by the upstream's
// repository of the old name.
type mover struct {
	moved     atomic.Bool
	old, new  string // "/<name>.git"
	proxy     http.Handler
	redirects atomic.Int64
}

func (m *mover) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, m.old+"/"); ok && m.moved.Load() {
		m.redirects.Add(1)
		target := m.new + "/" + rest
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, m.new+"/"); ok {
		r = r.Clone(r.Context())
		r.URL.Path = m.old + "/" + rest
	}
	m.proxy.ServeHTTP(w, r)
}

// A renamed upstream is shown renamed, with its new name and since when,
// in the API and the fetch log, and still served: one renamed on the
// forge, whose feed answers its lookup under the new nameWithOwner; one
// whose git server redirects its old path to the new one (the owner's
// check fails on the redirect, which git does not follow, and the owner
// reads where it leads).
func TestARenamedUpstreamIsShownWithItsNewName(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	for _, i := range []int{0, 1} {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	target, err := url.Parse(f.up.URL)
	if err != nil {
		t.Fatal(err)
	}
	mv := &mover{old: "/" + f.name(1) + ".git", new: "/moved-org/project-renamed.git", proxy: httputil.NewSingleHostReverseProxy(target)}
	front := httptest.NewServer(mv)
	t.Cleanup(front.Close)
	gh := &githubAPI{pushed: map[string]time.Time{}, renamed: map[string]string{}, token: "test-token-1"}
	gh.push(f.name(0), time.Now().Add(-time.Hour))
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	f.writeCatalog([]int{0}, "a repository on a forge with a feed")
	movingURL := front.URL + "/" + f.name(1) + ".git"
	f.writeFile("lists/front.list", movingURL+"\n")
	f.commitCatalog("and one whose git server will redirect it")
	movingKey := strings.TrimSuffix(strings.TrimPrefix(movingURL, "http://"), ".git")
	frontHost := strings.TrimPrefix(front.URL, "http://")
	host := strings.TrimPrefix(f.up.URL, "http://")
	start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--log-level", "debug",
		"--max-interval", "3s", "--min-interval", "1s",
		"--forge", host+"=github,api="+api.URL+"/api", "--forge-token", host+"="+gh.token, "--forge-min-ask-interval", "1s")
	eventually(t, 60*time.Second, "served", func() error {
		if err := f.servedLikeUpstream([]int{0}); err != nil {
			return err
		}
		_, err := lsRemote(f.base + "/" + movingKey + ".git")
		return err
	})
	if repos, err := apiRepos(f.base); err != nil || repos[f.key(0)].State == "renamed" || repos[movingKey].State == "renamed" {
		t.Fatalf("renamed before any rename: %+v, %v", repos, err)
	}

	gh.mu.Lock()
	gh.renamed[strings.ToLower(f.name(0))] = "New-Owner/project-renamed"
	gh.mu.Unlock()
	mv.moved.Store(true)
	want := map[string]string{f.key(0): host + "/New-Owner/project-renamed", movingKey: frontHost + "/moved-org/project-renamed"}
	eventually(t, 60*time.Second, "both shown renamed", func() error {
		repos, err := apiRepos(f.base)
		if err != nil {
			return err
		}
		for key, to := range want {
			r := repos[key]
			if r.State != "renamed" || r.RenamedTo != to || r.StateSince == "" || !r.Served {
				return fmt.Errorf("%s: %s to %q since %q, served %v; want renamed to %q, served", key, r.State, r.RenamedTo, r.StateSince, r.Served, to)
			}
		}
		return nil
	})
	if mv.redirects.Load() == 0 {
		t.Fatal("the git server redirected nothing")
	}
	// The fetch log says so: the owner's check that met the redirect, and
	// the full node's entry of the rename.
	for key, to := range want {
		eventually(t, 30*time.Second, "the fetch log's rename of "+key, func() error {
			var page struct {
				Entries []struct {
					Kind      string `json:"kind"`
					RenamedTo string `json:"renamed_to"`
				} `json:"entries"`
			}
			if code := call(t, "GET", f.base+"/api/v1/repos/"+key+"/log?limit=1000", apiToken, nil, &page); code != http.StatusOK {
				return fmt.Errorf("GET the log: %d", code)
			}
			for _, e := range page.Entries {
				if e.Kind == "rename" && e.RenamedTo == to {
					return nil
				}
			}
			return fmt.Errorf("no rename entry to %s: %+v", to, page.Entries)
		})
	}
}
