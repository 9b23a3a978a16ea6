package node

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Bug seen (TestFullDiskHandsRepositoriesBack, now and then): a node with a
// 64-byte quota held three mirrors. A measure of its disk taken while its
// first clone was under way (nothing held yet) was still used after that
// clone ended, so the next clone was let in at the size of nothing.
func TestAClonedMirrorCountsAtOnceAgainstTheQuota(t *testing.T) {
	dir := t.TempDir()
	ms, err := mirror.Open(dir, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	n := newTestNode()
	n.mirror, n.digests = ms, map[repokey.Key]string{}
	n.cfg.DiskQuota, n.cfg.DiskHighWater = 64, 0.85

	release, ok := n.ReserveClone()
	if !ok {
		t.Fatal("the first clone of an empty node was refused")
	}
	if _, ok := n.ReserveClone(); ok {
		t.Fatal("a second clone was let in before the first told how big a mirror is")
	}
	n.Disk() // a heartbeat measures the disk while the clone is under way: nothing held
	// The clone ends: its mirror is in place and known, then the
	// reservation is released.
	if err := os.MkdirAll(filepath.Join(ms.Root(), "h", "a.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ms.Root(), "h", "a.git", "pack"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.digests["h/a"] = "d1" // what SetDigest does, without the store
	n.mu.Unlock()
	if _, ok := n.ReserveClone(); ok {
		t.Fatal("a clone was let in over the quota while the first one's reservation was still held")
	}
	release()
	if _, ok := n.ReserveClone(); ok {
		t.Fatal("a clone was let in over the quota")
	}
}
