package e2e

import (
	"path/filepath"
	"testing"
	"time"
)

// `gitfleet up` alone is a complete mirror: coordinator and full node in
// one process, fetching every repository itself.
func TestUpIsACompleteMirrorOnOneMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 6)
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main", "dev"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(repos, "6 repositories")
	start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms")
	eventually(t, 60*time.Second, "all served by gitfleet up", func() error { return f.servedLikeUpstream(repos) })
	if _, err := f.up.Commit(f.name(2), "dev"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a push reaches the mirror", func() error { return f.servedLikeUpstream(repos) })
}
