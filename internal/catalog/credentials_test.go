package catalog

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// gitArgvs reads the command line of every process of the machine that
// names needle (the catalog server's address), each as one string.
func gitArgvs(needle string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(needle)) {
			continue
		}
		out = append(out, string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	return out
}

// A catalog repository behind Basic auth, its password in the catalog URL
// (as --catalog or the YAML file gives it): every fetch and check
// succeeds, and no process's command line, read while git talks to the
// server, holds the password.
func TestACatalogsPasswordNeverReachesGitsCommandLine(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc to read command lines from")
	}
	const user, password = "catalog-reader", "s3cret-catalog-pass"
	root := t.TempDir()
	up := newTestRepo(t)
	first := up.commit(map[string]string{"a.list": "https://github.com/a/1\n"})
	if err := gittest.Git("", "clone", "-q", "--bare", up.dir, filepath.Join(root, "catalog.git")); err != nil {
		t.Fatal(err)
	}
	backend, err := gittest.NewBackend(root)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var mu sync.Mutex
	var seen, leaks []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// git (and its remote-http helper) waits for this answer: its
		// command line is there to read.
		mu.Lock()
		for _, argv := range gitArgvs(addr) {
			seen = append(seen, argv)
			if strings.Contains(argv, password) {
				leaks = append(leaks, argv)
			}
		}
		mu.Unlock()
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="catalog"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	remote := "http://" + user + ":" + password + "@" + addr + "/catalog.git"
	git := SourceGit(0, "")
	if got, err := CheckSource(context.Background(), git, remote); err != nil || got != first {
		t.Fatalf("CheckSource = %s, %v; want %s", got, err, first)
	}
	s, err := OpenSource(t.TempDir(), remote, git, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Fetch(context.Background()); err != nil || got != first {
		t.Fatalf("Fetch = %s, %v; want %s", got, err, first)
	}
	// Without the password, the server refuses: the fetch above did use it.
	resp, err := http.Get("http://" + addr + "/catalog.git/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the password the server answers %s: it does not check it", resp.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("no git process naming the server was seen during the requests")
	}
	if len(leaks) > 0 {
		t.Errorf("the password is on the command line of %d processes, e.g. %q", len(leaks), leaks[0])
	}
}

func TestCredentialsOfACatalogURLLeaveItsCommandLine(t *testing.T) {
	for _, tt := range []struct{ in, clean string }{
		{"https://u:p@example.org/c.git", "https://example.org/c.git"},
		{"https://tok@example.org:8443/c.git", "https://example.org:8443/c.git"},
		{"ssh://git@example.org/c.git", "ssh://git@example.org/c.git"},
		{"git@example.org:c.git", "git@example.org:c.git"},
	} {
		clean, auth, err := remoteOf(tt.in)
		if err != nil || clean != tt.clean {
			t.Errorf("remoteOf(%q) = %q, %v; want %q", tt.in, clean, err, tt.clean)
		}
		if (clean != tt.in) != (len(auth) > 0) {
			t.Errorf("remoteOf(%q): auth %q", tt.in, auth)
		}
	}
	for _, bad := range []string{"ssh://u:pw@example.org/c.git", "git://u:pw@example.org/c.git"} {
		if _, _, err := remoteOf(bad); err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("remoteOf(%q): %v; want a refusal that does not quote the password", bad, err)
		}
	}
}
