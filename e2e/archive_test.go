package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// A catalog entry with archive: true, under gitfleet up: the upstream adds
// a commit and force-pushes it away; the mirror keeps the old tip under
// refs/archive/<time>/refs/heads/main, the API lists it (ref, old id,
// time), a clone gets neither the ref nor the commit, and a fetch of the
// old commit's id gets it.
func TestAForcePushUnderArchiveTrueKeepsTheOldTipHiddenAndListed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	name := f.name(0)
	if err := f.up.Create(name, []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	f.writeFile("p/archived/archived", fmt.Sprintf("url: %s\narchive: true\n", f.up.RepoURL(name)))
	f.commitCatalog("one repository that archives rewrites")
	data := filepath.Join(t.TempDir(), "up")
	start(t, "up", "up", "--data", data, "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token, "--api-token", apiToken,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms")
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
	eventually(t, 60*time.Second, "the commit served", func() error { return f.servedLikeUpstream([]int{0}) })
	if err := gittest.Git("", "--git-dir="+bare, "update-ref", "refs/heads/main", kept); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the force-push served", func() error { return f.servedLikeUpstream([]int{0}) })

	var page struct {
		Key  string `json:"key"`
		Refs []struct {
			Name string    `json:"name"`
			Ref  string    `json:"ref"`
			Old  string    `json:"old_id"`
			Time time.Time `json:"time"`
		} `json:"refs"`
	}
	eventually(t, 30*time.Second, "the API lists the old tip", func() error {
		resp, b := send(t, http.MethodGet, f.base+"/api/v1/repos/"+f.key(0)+"/archive", apiToken, nil)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return err
		}
		if len(page.Refs) != 1 || page.Refs[0].Ref != "refs/heads/main" || page.Refs[0].Old != secret ||
			page.Refs[0].Name != fmt.Sprintf("refs/archive/%d/refs/heads/main", page.Refs[0].Time.Unix()) {
			return fmt.Errorf("archive %s, want main at %s", b, secret)
		}
		return nil
	})
	mirror := filepath.Join(data, "node", "repos", filepath.FromSlash(f.key(0))+".git")
	if got, err := gittest.Output("", "--git-dir="+mirror, "rev-parse", page.Refs[0].Name); err != nil || strings.TrimSpace(got) != secret {
		t.Fatalf("the mirror's %s is %q (%v), want %s", page.Refs[0].Name, got, err, secret)
	}

	url := f.base + "/" + f.key(0) + ".git"
	clone := filepath.Join(t.TempDir(), "clone")
	if err := gittest.Git("", "clone", "-q", "--mirror", url, clone); err != nil {
		t.Fatalf("clone after the force-push: %v", err)
	}
	if got, err := gittest.RefsOf(clone); err != nil || got["refs/heads/main"] != kept {
		t.Fatalf("the clone has %v (%v), want main %s", got, err, kept)
	}
	if out, _ := gittest.Output("", "--git-dir="+clone, "for-each-ref", "refs/archive/"); out != "" {
		t.Errorf("the clone got archive refs: %q", out)
	}
	if err := gittest.Git("", "--git-dir="+clone, "cat-file", "-e", secret); err == nil {
		t.Error("the clone holds the commit that the force-push took away")
	}
	byID := t.TempDir()
	if err := gittest.Git(byID, "init", "-q", "--bare"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(byID, "fetch", "-q", url, secret); err != nil {
		t.Fatalf("git fetch of the archived commit by its id: %v", err)
	}
	if err := gittest.Git(byID, "cat-file", "-e", blob); err != nil {
		t.Error("the fetch of the archived commit by id lacks its blob")
	}
}
