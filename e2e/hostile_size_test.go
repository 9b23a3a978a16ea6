package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// oversizedPull is what the full node logs once it has dropped a pull
// over --max-repo-size and fetched the repository from the upstream.
const oversizedPull = "fetched from the upstream after an oversized pull"

// A hostile volunteer answers the full node's pull with a pack that never
// ends, counting on its side the bytes that left it. The full node stops
// the pull near its --max-repo-size, drops what came, serves the
// upstream's refs (fetched from the upstream itself), and its disk ends
// clean: no quarantine left in tmp, no partial pack in the mirror.
func TestHostileNodeServingAnEndlessPackIsStoppedAtMaxRepoSize(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const limit = 4 << 20
	f, h := hostileFleet(t, false, "--max-repo-size", "4MiB", "--log-level", "debug")
	key := f.key(0)
	endless := gittest.NewEndlessPack(h.plain)
	h.serveWith(endless)
	forged := h.forge(key, "main")
	h.report(key, "")
	eventually(t, 90*time.Second, "the full node dropped the oversized pull and fetched the upstream", func() error {
		if err := publicLikeUpstream(f); err != nil {
			t.Fatalf("the public mirror left the upstream: %v", err)
		}
		if c := f.procs["full"].count(oversizedPull); c < 1 {
			return fmt.Errorf("no oversized pull logged yet (%d fetches answered, %d bytes sent)", endless.Fetches.Load(), endless.Sent.Load())
		}
		return nil
	})
	if err := publicLikeUpstream(f); err != nil {
		t.Fatalf("the public mirror left the upstream: %v", err)
	}
	served, err := lsRemote(f.base + "/" + key + ".git")
	if err != nil {
		t.Fatal(err)
	}
	if served["refs/heads/main"] == forged {
		t.Fatal("the hostile node's tip is served")
	}
	eventually(t, 60*time.Second, "the hostile node's client hung up", func() error {
		if d, n := endless.Done.Load(), endless.Fetches.Load(); n == 0 || d != n {
			return fmt.Errorf("%d of %d fetches still sending", n-d, n)
		}
		return nil
	})
	sent := endless.Sent.Load()
	t.Logf("the hostile node sent %d bytes in %d fetches; --max-repo-size %d", sent, endless.Fetches.Load(), limit)
	// What arrived before the watch saw it, and what the tunnel's window
	// and the sockets held: far below the 100 GiB the pack announced.
	if sent < limit || sent > limit+256<<20 {
		t.Fatalf("the hostile node sent %d bytes", sent)
	}
	if n := mismatchesOf(t, f, h.id); n != 0 {
		t.Fatalf("an oversized pull counted as %d mismatches", n)
	}

	data := f.dataDirs["full"]
	ents, err := os.ReadDir(filepath.Join(data, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "packcache" && !inFlightTrace(e.Name()) {
			t.Errorf("left in the full node's tmp: %s", e.Name())
		}
	}
	repo := filepath.Join(data, "repos", filepath.FromSlash(key)+".git")
	packs, err := os.ReadDir(filepath.Join(repo, "objects", "pack"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range packs {
		if strings.HasPrefix(p.Name(), "tmp_") {
			t.Errorf("a partial pack left in the mirror: %s", p.Name())
		}
	}
	if size, err := mirror.TreeSize(repo); err != nil || size > limit {
		t.Fatalf("the mirror holds %d bytes (%v), over the limit %d", size, err, limit)
	}
}
