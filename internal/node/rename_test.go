package node

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A git server on 127.0.0.1 whose paths redirect as the test says: the
// owner's probe follows a chain on the same host to its end, stops at
// another host's key without asking it, and names nothing for a loop, a
// target that does not answer, or a hostile Location. Each request is
// counted, so that a probe that followed another host would show.
func TestTheRedirectProbeFollowsTheSameHostOnlyAndStopsAtLoops(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the probe asked another host: %s", r.URL)
	}))
	defer other.Close()
	routes := map[string]string{ // path without .git -> Location ("": answers 200)
		"/chain/a": "/chain/b.git/info/refs?service=git-upload-pack",
		"/chain/b": "/chain/c/info/refs?service=git-upload-pack",
		"/chain/c": "",
		"/loop/a":  "/loop/b/info/refs",
		"/loop/b":  "/loop/a.git/info/refs",
		"/away/a":  other.URL + "/far/away.git/info/refs",
		"/creds/a": "http://u:p@HOST/x/y/info/refs",
		"/climb/a": "/x/../../y/info/refs",
		"/dead/a":  "/dead/b/info/refs", // /dead/b: 404
	}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(strings.TrimSuffix(r.URL.Path, repokey.RefsPath), ".git")
		loc, ok := routes[path]
		switch {
		case !ok:
			http.NotFound(w, r)
		case loc == "":
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		default:
			w.Header().Set("Location", strings.Replace(loc, "HOST", strings.TrimPrefix(srv.URL, "http://"), 1))
			w.WriteHeader(http.StatusMovedPermanently)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	n := &Node{cfg: Config{AllowPrivate: true}, dialer: egressDialer(Config{AllowPrivate: true})}
	for _, tc := range []struct{ path, want string }{
		{"chain/a", host + "/chain/c"},
		{"away/a", strings.TrimPrefix(other.URL, "http://") + "/far/away"},
		{"loop/a", ""},
		{"creds/a", ""},
		{"climb/a", ""},
		{"dead/a", ""},
	} {
		key := repokey.Key(host + "/" + tc.path)
		to, err := n.followRedirects(context.Background(), key, srv.URL+"/"+tc.path+".git")
		if to.String() != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%s: %q, %v; want %q", tc.path, to, err, tc.want)
		}
	}
	// The egress policy holds for the probe: a node that may not reach
	// private addresses asks nothing there.
	strict := &Node{cfg: Config{}, dialer: egressDialer(Config{})}
	if to, err := strict.followRedirects(context.Background(), repokey.Key(host+"/chain/a"), srv.URL+"/chain/a.git"); err == nil {
		t.Errorf("a probe past the egress policy named %q", to)
	}
}
