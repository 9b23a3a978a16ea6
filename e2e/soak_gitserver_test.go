package e2e

import (
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// plainGitServer serves the bare repositories under dir over smart HTTP
// with git upload-pack itself, as git http-backend and the big hosts do:
// unlike gitfleet's own serving, it gives any object it holds to a
// protocol v2 client that asks for it by ID, reachable or not. The soak's
// upstreams take pushes back, and the full node asks them for such
// commits.
func plainGitServer(t testing.TB, dir string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveUploadPack(w, r, dir)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func serveUploadPack(w http.ResponseWriter, r *http.Request, root string) {
	name, advertise := strings.CutSuffix(r.URL.Path, "/info/refs")
	if !advertise {
		var ok bool
		if name, ok = strings.CutSuffix(r.URL.Path, "/git-upload-pack"); !ok || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
	} else if r.URL.Query().Get("service") != "git-upload-pack" {
		http.Error(w, "only git-upload-pack", http.StatusForbidden)
		return
	}
	name = strings.TrimPrefix(name, "/")
	if !strings.HasSuffix(name, ".git") || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	repo := filepath.Join(root, filepath.FromSlash(name))
	if fi, err := os.Stat(repo); err != nil || !fi.IsDir() {
		http.NotFound(w, r)
		return
	}
	args := []string{"upload-pack", "--stateless-rpc"}
	if advertise {
		args = append(args, "--advertise-refs")
	}
	cmd := exec.CommandContext(r.Context(), "git", append(args, repo)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if p := r.Header.Get("Git-Protocol"); p == "version=2" {
		cmd.Env = append(cmd.Env, "GIT_PROTOCOL="+p)
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	w.Header().Set("Cache-Control", "no-cache")
	if advertise {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		if r.Header.Get("Git-Protocol") != "version=2" {
			_, _ = io.WriteString(w, "001e# service=git-upload-pack\n0000")
		}
	} else {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		cmd.Stdin = body
	}
	cmd.Stdout = w
	_ = cmd.Run()
}
