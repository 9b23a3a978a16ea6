package fullnode

import (
	"context"
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
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Under --disk-quota a full node counts, beside its served mirrors, the
// data it keeps for --retention (a removed repository in <data>/removed)
// and its pack cache's files: what the full-disk policy and
// gitfleet_full_disk_used_bytes see.
func TestRetainedDataAndThePackCacheCountTowardsTheDiskQuota(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1e9, 0))
	f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: dir, DiskQuota: 1 << 30, DiskHighWater: 0.85},
		FullDiskPolicy: FullDiskRefuseNew, ServeCache: gitserve.CacheConfig{MaxBytes: 64 << 20, TTL: time.Hour}},
		slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.n.TestHooks().Close)
	ms, cache := f.mirror, f.packs // the pack cache in <data>/tmp/packcache
	measure := func() uint64 {
		clk.Advance(10 * time.Second) // the disk is measured at most every 10 s
		f.measureDisk()
		used, _, _, _ := f.diskFigures()
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
	f.n.SetDigest(key, "d1")
	if used := measure(); used < size {
		t.Fatalf("a mirror of %d bytes measured at %d", size, used)
	}

	// Removed: out of the served tree, kept for the retention.
	if err := ms.Retire(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	f.n.ForgetDigest(key)
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
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Cache: cache, Resolve: func(repokey.Key) (string, bool) {
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
