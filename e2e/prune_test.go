package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// A secret that the upstream force-pushed away stops being served, even by
// the id of its blob, within --prune-after; clones keep working.
func TestPruneDropsForcePushedSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	name := f.name(0)
	if err := f.up.Create(name, []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	f.writeCatalog([]int{0}, "one repository")
	data := filepath.Join(t.TempDir(), "up")
	p := start(t, "up", "up", "--data", data, "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms",
		"--prune-after", "2s")
	eventually(t, 60*time.Second, "served by gitfleet up", func() error { return f.servedLikeUpstream([]int{0}) })

	bare := filepath.Join(f.up.Dir, name+".git")
	refs, err := f.up.Refs(name)
	if err != nil {
		t.Fatal(err)
	}
	kept := refs["refs/heads/main"]
	secret, err := f.up.AddBlob(name, "main", 2048)
	if err != nil {
		t.Fatal(err)
	}
	out, err := gittest.Output("", "--git-dir="+bare, "rev-parse", secret+":big.bin")
	if err != nil {
		t.Fatal(err)
	}
	blob := strings.TrimSpace(out)
	eventually(t, 60*time.Second, "the secret served", func() error { return f.servedLikeUpstream([]int{0}) })

	url := f.base + "/" + f.key(0) + ".git"
	fetchBlob := func() error {
		dir := t.TempDir()
		if err := gittest.Git(dir, "init", "-q", "--bare"); err != nil {
			t.Fatal(err)
		}
		return gittest.Git(dir, "-c", "protocol.version=2", "fetch", "-q", url, blob)
	}
	// While a ref reaches it, the blob is served by its id (as partial
	// clones ask for it): what follows can fail.
	if err := fetchBlob(); err != nil {
		t.Fatalf("the secret blob while main points at it: %v", err)
	}

	if err := gittest.Git("", "--git-dir="+bare, "update-ref", "refs/heads/main", kept); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the force-push served", func() error { return f.servedLikeUpstream([]int{0}) })
	eventually(t, 60*time.Second, "the secret blob no longer served by its id", func() error {
		if err := fetchBlob(); err == nil {
			return fmt.Errorf("blob %s still served", blob)
		}
		return nil
	})
	// Background maintenance may have dropped the blob first (a full run
	// keeps only what refs reach): the pruner still runs.
	eventually(t, 30*time.Second, "the log shows the pruning", func() error {
		if p.count("mirror pruned") == 0 {
			return fmt.Errorf("no pruning in the log")
		}
		return nil
	})

	// A normal clone still works and gets the upstream's refs.
	clone := filepath.Join(t.TempDir(), "clone")
	if err := gittest.Git("", "clone", "-q", "--bare", url, clone); err != nil {
		t.Fatalf("clone after pruning: %v", err)
	}
	got, err := gittest.RefsOf(clone)
	if err != nil || got["refs/heads/main"] != kept || got["refs/tags/v1"] != refs["refs/tags/v1"] {
		t.Fatalf("clone after pruning has %v (%v), want main %s and v1", got, err, kept)
	}
	if err := gittest.Git(clone, "fsck", "--no-dangling"); err != nil {
		t.Fatalf("fsck of the clone: %v", err)
	}
	// The full node's mirror on disk (up keeps it under <data>/node) is
	// whole and its mark is gone.
	mirror := filepath.Join(data, "node", "repos", filepath.FromSlash(f.key(0))+".git")
	if err := gittest.Git("", "--git-dir="+mirror, "fsck", "--no-dangling"); err != nil {
		t.Fatalf("fsck of the pruned mirror: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mirror, "gitfleet-prune")); err == nil {
		t.Error("the prune mark is still in the mirror")
	}
}

// Every role prunes: the partial node that fetches the repository from the
// upstream, and the full node that pulls it from the partial node through a
// verified pull.
func TestPruneOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	f.seed([]int{0}, "one repository")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken,
		"--capacity", "0", "--prune-after", "1s")
	f.startNode("partial-1", "partial", "--prune-after", "1s")
	eventually(t, 90*time.Second, "served", func() error { return f.servedLikeUpstream([]int{0}) })

	name := f.name(0)
	bare := filepath.Join(f.up.Dir, name+".git")
	refs, err := f.up.Refs(name)
	if err != nil {
		t.Fatal(err)
	}
	kept := refs["refs/heads/main"]
	secret, err := f.up.AddBlob(name, "main", 2048)
	if err != nil {
		t.Fatal(err)
	}
	out, err := gittest.Output("", "--git-dir="+bare, "rev-parse", secret+":big.bin")
	if err != nil {
		t.Fatal(err)
	}
	blob := strings.TrimSpace(out)
	mirrors := map[string]string{}
	for _, node := range []string{"full", "partial-1"} {
		mirrors[node] = filepath.Join(f.dataDir(node), "repos", filepath.FromSlash(f.key(0))+".git")
	}
	holding := func(want bool) func() error {
		return func() error {
			if err := f.servedLikeUpstream([]int{0}); err != nil {
				return err
			}
			for node, dir := range mirrors {
				has := gittest.Git("", "--git-dir="+dir, "cat-file", "-e", blob) == nil
				if has != want {
					return fmt.Errorf("%s holds the secret blob: %v, want %v", node, has, want)
				}
			}
			return nil
		}
	}
	eventually(t, 90*time.Second, "the secret on both nodes", holding(true))
	if err := gittest.Git("", "--git-dir="+bare, "update-ref", "refs/heads/main", kept); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the secret gone from both nodes", holding(false))
	for node, dir := range mirrors {
		// Background maintenance may have dropped the objects first (a
		// full run repacks what refs reach): the pruner still runs.
		eventually(t, 30*time.Second, node+"'s log shows the pruning", func() error {
			if f.procs[node].count("mirror pruned") == 0 {
				return fmt.Errorf("no pruning in %s's log", node)
			}
			return nil
		})
		if err := gittest.Git("", "--git-dir="+dir, "fsck", "--no-dangling"); err != nil {
			t.Errorf("fsck of %s's pruned mirror: %v", node, err)
		}
	}
}
