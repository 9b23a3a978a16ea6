package node

import (
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// Under --disk-quota a full node counts, beside its served mirrors, the
// data it keeps for --retention (a removed repository in <data>/removed)
// and its pack cache's files: what the full-disk policy and
// gitfleet_full_disk_used_bytes see.
func TestRetainedDataAndThePackCacheCountTowardsTheDiskQuota(t *testing.T) {
	dir := t.TempDir()
	ms, err := mirror.Open(dir, &gitcmd.Runner{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	n := newTestNode()
	clk := n.clk.(*clock.Fake)
	n.mirror, n.digests = ms, map[string]string{}
	n.cfg.DiskQuota, n.cfg.DiskHighWater, n.cfg.FullDiskPolicy = 1<<30, 0.85, FullDiskRefuseNew
	cache, err := gitserve.NewPackCache(filepath.Join(dir, "tmp", "packcache"), gitserve.CacheConfig{MaxBytes: 64 << 20, TTL: time.Hour}, clk)
	if err != nil {
		t.Fatal(err)
	}
	n.full = &fullNode{n: n, packs: cache, diskWait: map[string]bool{}, pending: map[string]bool{}, retryAt: map[string]time.Time{}}
	measure := func() uint64 {
		clk.Advance(10 * time.Second) // the disk is measured at most every 10 s
		n.full.measureDisk()
		used, _, _, _ := n.full.diskFigures()
		return used
	}

	const key, size = "example.com/team/repo", 100_000
	repo := ms.Path(key)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "pack"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.digests[key] = "d1"
	n.mu.Unlock()
	if used := measure(); used < size {
		t.Fatalf("a mirror of %d bytes measured at %d", size, used)
	}

	// Removed: out of the served tree, kept for the retention.
	if err := ms.Retire(key); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	delete(n.digests, key) // what forgetDigest does, without the store
	n.mu.Unlock()
	if used := measure(); used < size {
		t.Fatalf("the data kept for --retention is not counted: %d bytes used, %d kept", used, size)
	}
	// Unchanged since, the removed data is not walked again.
	if err := os.WriteFile(filepath.Join(dir, "removed", "unseen"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if used := measure(); used >= 2*size {
		t.Fatalf("the removed data was walked again without a change: %d bytes", used)
	}
	kept := measure()

	// A clone through the pack cache leaves its answer on disk.
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("c", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := up.AddBlob("c", "main", 200<<10); err != nil {
		t.Fatal(err)
	}
	h := &gitserve.Handler{Git: &gitcmd.Runner{}, Cache: cache, Resolve: func(string) (string, bool) {
		return filepath.Join(up.Dir, "c.git"), true
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/127.0.0.1" + r.URL.Path // a path the handler parses as a key
		h.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	if err := gittest.Git("", "clone", "-q", "--bare", "http://"+ln.Addr().String()+"/team/c.git", filepath.Join(t.TempDir(), "c.git")); err != nil {
		t.Fatal(err)
	}
	cached := cache.Stats().Bytes
	if cached < 200<<10 {
		t.Fatalf("the pack cache holds %d bytes after a clone", cached)
	}
	if used := measure(); used < kept+uint64(cached) {
		t.Fatalf("the pack cache's %d bytes are not counted: %d used, %d before", cached, used, kept)
	}
}
