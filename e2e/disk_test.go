package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A partial node whose disk quota is full takes no new repositories: what
// it was given it hands back, and the rest of the fleet serves them.
func TestFullDiskHandsRepositoriesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	// The three nodes register as 1, 2 and 3 in some order. Whichever the
	// full-disk node is, it is given two repositories that exist: one to
	// clone (it tells how big a mirror is) and one to hand back.
	members := membersOf(1, 2, 3)
	repos := f.reposPlacing(12, 2, members)
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(repos, fmt.Sprintf("%d repositories", len(repos)))
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr)
	f.startNode("partial-1", "partial", "--disk-quota", "64B")
	f.startNode("partial-2", "partial")
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	f.placedAsComputed(membersOf(ownerOfNode(t, f.dataDirs["full"]), ownerOfNode(t, f.dataDirs["partial-1"]),
		ownerOfNode(t, f.dataDirs["partial-2"])), members)

	// The node may keep the one mirror that told it how big a mirror is,
	// and nothing more.
	full := ownerOfNode(t, f.dataDirs["partial-1"])
	owned := func() (map[string]bool, error) {
		api, err := apiRepos(f.base)
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for k, r := range api {
			if r.Owner == full {
				out[k] = true
			}
		}
		return out, nil
	}
	held := func() int {
		n := 0
		_ = filepath.WalkDir(filepath.Join(f.dataDirs["partial-1"], "repos"), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && strings.HasSuffix(p, ".git") {
				n++
				return filepath.SkipDir
			}
			return nil
		})
		return n
	}
	eventually(t, 30*time.Second, "the full-disk node owns only what it holds", func() error {
		o, err := owned()
		if err != nil {
			return err
		}
		if len(o) != held() || len(o) > 1 {
			return fmt.Errorf("owns %d, holds %d mirrors", len(o), held())
		}
		return nil
	})
	before, _ := owned()
	log, _ := os.ReadFile(f.procs["partial-1"].log)
	if !strings.Contains(string(log), "disk full: handing the repository back") {
		t.Fatal("the full-disk node handed nothing back (it was given nothing: the test proves less than it says)")
	}
	// New repositories go elsewhere too.
	all := seq(0, len(repos)+2)
	for _, i := range all[len(repos):] {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(all, "two more")
	eventually(t, 60*time.Second, "new repositories served", func() error { return f.servedLikeUpstream(all) })
	after, err := owned()
	if err != nil {
		t.Fatal(err)
	}
	for k := range after {
		if !before[k] {
			t.Errorf("%s went to the node whose disk is full", k)
		}
	}
}
