package gittest

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"sync/atomic"
)

// Backend serves the bare repositories under a directory as git's own
// smart HTTP server does: each request runs `git http-backend` through CGI
// (protocol v2 when the client asks for it, with the Git-Protocol header).
// It counts the git requests it served; GET /-/requests answers the count.
type Backend struct {
	cgi      *cgi.Handler
	requests atomic.Int64
}

// NewBackend serves root's repositories, at /<name>.git for root/<name>.git.
func NewBackend(root string) (*Backend, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git http-backend: %w", err)
	}
	return &Backend{cgi: &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent"},
		InheritEnv: []string{"PATH", "TMPDIR"},
	}}, nil
}

// Requests is how many git requests the backend has served.
func (b *Backend) Requests() int64 { return b.requests.Load() }

func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/-/requests" {
		fmt.Fprintln(w, b.requests.Load())
		return
	}
	b.requests.Add(1)
	b.cgi.ServeHTTP(w, r)
}
