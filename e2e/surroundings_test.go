package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// The README starts ./gitfleet from its source checkout, with relative
// paths. A .git/config there that rewrites URLs (here: every http:// to a
// port where nothing listens) must not reach the git that gitfleet runs.
func TestUpStartedInsideARepositoryThatRewritesURLsMirrorsTheRealUpstreams(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	work := t.TempDir()
	if err := gittest.Git("", "init", "-q", work); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(work, "config", "url.http://127.0.0.1:1/.insteadOf", "http://"); err != nil {
		t.Fatal(err)
	}
	f.catalog = filepath.Join(work, "catalog")
	repos := seq(0, 4)
	f.seed(repos, "4 repositories")

	// The planted setting works on a git run from there: the test can fail.
	plain := exec.Command("git", "ls-remote", "--", f.up.RepoURL(f.name(0)))
	plain.Dir = work
	if err := plain.Run(); err == nil {
		t.Fatal("plain git ls-remote from the checkout succeeded: the planted insteadOf was not applied")
	}

	startIn(t, work, "up", "up", "--data", "data", "--catalog", "catalog",
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms")
	eventually(t, 60*time.Second, "all served, fetched from the real upstreams", func() error { return f.servedLikeUpstream(repos) })
	// The relative --data is where the operator meant: in the directory
	// gitfleet was started from.
	if _, err := os.Stat(filepath.Join(work, "data", "node", "repos")); err != nil {
		t.Errorf("the mirrors are not under the relative --data: %v", err)
	}
}
