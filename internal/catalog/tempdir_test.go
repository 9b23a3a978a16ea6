package catalog

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// The catalog's fetch over http writes curl's trace of the headers in the
// coordinator's own temporary directory, which each start empties, not in
// the machine's: a killed coordinator leaves nothing behind there.
func TestTheCatalogsFetchWritesItsTraceInItsOwnTempDir(t *testing.T) {
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

	data := t.TempDir()
	left := filepath.Join(TempDir(data), "gitfleet-curl-trace-123")
	if err := os.MkdirAll(filepath.Dir(left), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(left, []byte("<= Recv header: Retry-After: 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp, err := CleanTempDir(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("%s after CleanTempDir: %v, want it gone", left, err)
	}

	// While git waits for the server's answer, its trace is there.
	var traced atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ents, _ := os.ReadDir(tmp)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "gitfleet-curl-trace-") {
				traced.Add(1)
			}
		}
		backend.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	s, err := OpenSource(data, "http://"+ln.Addr().String()+"/catalog.git", SourceGit(0, tmp), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Fetch(context.Background()); err != nil || got != first {
		t.Fatalf("Fetch = %s, %v; want %s", got, err, first)
	}
	if traced.Load() == 0 {
		t.Errorf("no curl trace in %s while the fetch ran", tmp)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("%s holds %d files after the fetch, want none", tmp, len(ents))
	}
}
