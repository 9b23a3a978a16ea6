// Package gitserve serves bare repositories read-only over git's smart HTTP
// protocol (v0 and v2), by running `git upload-pack --stateless-rpc` through
// gitcmd. A stock `git clone http://host/<key>.git` works against it. It
// serves only what its Resolver says exists, and never receive-pack.
package gitserve

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Resolver maps a repository key to its directory on disk; ok is false when
// the repository is not served (a 404).
type Resolver func(key string) (dir string, ok bool)

// Handler serves git smart HTTP for the keys that resolve.
type Handler struct {
	Git     *gitcmd.Runner
	Resolve Resolver
	Log     *slog.Logger
	// MaxRequest bounds an upload-pack request body (default 64 MiB).
	MaxRequest int64
	// Timeout bounds one upload-pack run (default 30 minutes).
	Timeout time.Duration
	// OnFailure, when set, is told of every upload-pack that failed while
	// its client was still there (a corrupt repository shows this way).
	OnFailure func(key string, err error)
}

// Match splits a request path into the repository key and the git endpoint
// ("info/refs" or "git-upload-pack" or "git-receive-pack"). ok is false
// when the path is not a git request.
func Match(path string) (key, endpoint string, ok bool) {
	p := strings.TrimPrefix(path, "/")
	for _, ep := range []string{"/info/refs", "/git-upload-pack", "/git-receive-pack"} {
		if strings.HasSuffix(p, ep) {
			key = strings.TrimSuffix(strings.TrimSuffix(p, ep), ".git")
			return key, ep[1:], key != ""
		}
	}
	return "", "", false
}

var protoHeader = regexp.MustCompile(`^[a-z0-9=.:_-]{1,64}$`)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ep, ok := Match(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if ep == "git-receive-pack" || r.URL.Query().Get("service") == "git-receive-pack" {
		http.Error(w, "this mirror is read-only", http.StatusForbidden)
		return
	}
	if repokey.Check(key) != nil {
		http.NotFound(w, r)
		return
	}
	dir, found := h.Resolve(key)
	if !found {
		http.Error(w, "repository not found", http.StatusNotFound)
		return
	}
	var env []string
	if gp := r.Header.Get("Git-Protocol"); gp != "" {
		if protoHeader.MatchString(gp) {
			env = append(env, "GIT_PROTOCOL="+gp)
		}
	}
	v2 := strings.Contains(r.Header.Get("Git-Protocol"), "version=2")
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	cmd := gitcmd.Cmd{Name: "upload-pack", Args: []string{dir}, Env: env, Timeout: timeout,
		Config: []string{"uploadpack.allowFilter=true", "uploadpack.allowAnySHA1InWant=false"}}
	w.Header().Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
	switch ep {
	case "info/refs":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Query().Get("service") != "git-upload-pack" {
			http.Error(w, "only smart HTTP (service=git-upload-pack) is served", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		cmd.Flags = []string{"--stateless-rpc", "--advertise-refs"}
		pw := &lazyWriter{w: w}
		if !v2 {
			pw.prefix = []byte(pktLine("# service=git-upload-pack\n") + "0000")
		}
		cmd.Stdout = pw
		h.run(r.Context(), w, pw, key, cmd)
	case "git-upload-pack":
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		max := h.MaxRequest
		if max <= 0 {
			max = 64 << 20
		}
		var body io.Reader = http.MaxBytesReader(w, r.Body, max)
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(body)
			if err != nil {
				http.Error(w, "bad gzip body", http.StatusBadRequest)
				return
			}
			defer gz.Close()
			body = io.LimitReader(gz, max)
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		cmd.Flags = []string{"--stateless-rpc"}
		cmd.Stdin = body
		pw := &lazyWriter{w: w}
		cmd.Stdout = pw
		h.run(r.Context(), w, pw, key, cmd)
	}
}

func (h *Handler) run(ctx context.Context, w http.ResponseWriter, pw *lazyWriter, key string, cmd gitcmd.Cmd) {
	err := h.Git.Run(ctx, cmd)
	if err == nil {
		pw.flushPrefix()
		return
	}
	if ctx.Err() == nil && h.Log != nil {
		h.Log.Warn("upload-pack failed", "key", key, "err", err)
	}
	if ctx.Err() == nil && h.OnFailure != nil {
		h.OnFailure(key, err)
	}
	if !pw.started {
		http.Error(w, "git upload-pack failed", http.StatusInternalServerError)
	}
}

// lazyWriter writes its prefix before the first byte of output, so that an
// upload-pack that fails before writing anything can still answer 500.
type lazyWriter struct {
	w       http.ResponseWriter
	prefix  []byte
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	l.flushPrefix()
	n, err := l.w.Write(p)
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
	return n, err
}

func (l *lazyWriter) flushPrefix() {
	if l.started {
		return
	}
	l.started = true
	if len(l.prefix) > 0 {
		_, _ = l.w.Write(l.prefix)
	}
}

func pktLine(s string) string {
	const hex = "0123456789abcdef"
	n := len(s) + 4
	return string([]byte{hex[n>>12&0xf], hex[n>>8&0xf], hex[n>>4&0xf], hex[n&0xf]}) + s
}
