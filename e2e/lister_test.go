package e2e

import (
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// An organisation of 250 repositories on three API pages, named by one
// catalog line: the coordinator lists it through the forge's GraphQL API
// (the feed's stand-in, with its rate-limit headers and costs) and
// mirrors every repository, each showing the lister it came from. Two
// repositories the organisation gains are picked up at the next
// --lister-interval; a listing that drops half of them is held by purge
// protection, as a catalog commit that removed them would be: they stay
// served, and the API shows the held removal.
func TestAnOrganisationListerMirrorsItsRepositoriesAndHoldsAMassDrop(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	gh := &githubAPI{pushed: map[string]time.Time{}, token: "test-token-1"}
	name := func(i int) string { return fmt.Sprintf("acme/repo-%03d", i) }
	// Tiny repositories, made at once: one fast-import writes a root
	// commit for each into a template, and each repository is a copy of
	// it whose one branch is its own commit (distinct roots: no fork
	// network, whose members are cloned one after the other).
	roots := orgTemplate(t, filepath.Join(f.up.Dir, "template.git"), 252)
	copyRepo := func(i int) {
		t.Helper()
		copyTemplate(t, filepath.Join(f.up.Dir, "template.git"), filepath.Join(f.up.Dir, name(i)+".git"), roots[i])
		gh.push(name(i), time.Now().Add(-time.Hour))
	}
	for i := range 250 {
		copyRepo(i)
	}
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	host := strings.TrimPrefix(f.up.URL, "http://")
	lister := "http://" + host + "/acme/*"
	f.writeFile("orgs.list", "# one line, a whole organisation\n"+lister+" archived: false\n")
	f.commitCatalog("the acme organisation")

	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token, "--api-token", apiToken,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--lister-interval", "5s",
		"--max-interval", "1h", "--min-interval", "30s", "--max-purge", "0.2",
		"--forge", host+"=github,api="+api.URL+"/api", "--forge-token", host+"="+gh.token)

	listed := func(want int) error {
		repos, err := apiRepos(f.base)
		if err != nil {
			return err
		}
		served := 0
		for _, r := range repos {
			if r.Served {
				served++
			}
		}
		if len(repos) != want || served != want {
			return fmt.Errorf("%d repositories listed, %d served; want %d", len(repos), served, want)
		}
		return nil
	}
	began := time.Now()
	eventually(t, 25*time.Minute, "the organisation's 250 repositories mirrored", func() error { return listed(250) })
	t.Logf("250 repositories listed and mirrored in %v", time.Since(began).Round(100*time.Millisecond))
	if n := gh.listings.Load(); n < 3 {
		t.Fatalf("%d listing requests, want the 3 pages", n)
	}
	var detail struct {
		Attrs map[string]string `json:"attrs"`
	}
	if code := call(t, "GET", f.base+"/api/v1/repos/"+f.keyOf(name(7)), "", nil, &detail); code != 200 || detail.Attrs["lister"] != lister {
		t.Fatalf("detail of %s: %d, attrs %v; want lister %s", name(7), code, detail.Attrs, lister)
	}
	for _, i := range []int{0, 123, 249} {
		if got, err := lsRemote(f.base + "/" + f.keyOf(name(i)) + ".git"); err != nil || got["refs/heads/main"] != roots[i] {
			t.Fatalf("%s served %v, %v; want main at %s", name(i), got, err, roots[i])
		}
	}

	// Two more: picked up at the next listing.
	copyRepo(250)
	copyRepo(251)
	eventually(t, 60*time.Second, "the two new repositories mirrored", func() error { return listed(252) })

	// Half of them gone from the organisation: more than --max-purge,
	// so the removal is held and every one stays served.
	for i := 0; i < 252; i += 2 {
		gh.drop(name(i))
	}
	var st struct {
		Pending *struct {
			Removed int      `json:"removed"`
			Keys    []string `json:"keys"`
		} `json:"pending_purge"`
	}
	eventually(t, 60*time.Second, "the listing's removals held", func() error {
		if code := call(t, "GET", f.base+"/api/v1/catalog", apiToken, nil, &st); code != 200 {
			return fmt.Errorf("catalog status %d", code)
		}
		if st.Pending == nil || len(st.Pending.Keys) != 126 {
			return fmt.Errorf("pending %+v, want 126 held", st.Pending)
		}
		return nil
	})
	if err := listed(252); err != nil {
		t.Fatalf("a held repository is no longer served: %v", err)
	}
	if got, err := lsRemote(f.base + "/" + f.keyOf(name(0)) + ".git"); err != nil || got["refs/heads/main"] != roots[0] {
		t.Fatalf("%s, held, served %v, %v", name(0), got, err)
	}
	if n := up.count("test-token-1"); n != 0 {
		t.Fatalf("the forge token is in the log %d times", n)
	}
}

// orgTemplate writes n root commits, one a branch, into a new bare
// repository at dir with one git fast-import, and returns their IDs.
func orgTemplate(t *testing.T, dir string, n int) []string {
	t.Helper()
	if err := gittest.Git("", "init", "-q", "--bare", "-b", "main", dir); err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for i := range n {
		content := fmt.Sprintf("repository %d\n", i)
		fmt.Fprintf(&in, "commit refs/heads/r%03d\ncommitter Test <test@example.org> 1700000000 +0000\ndata 4\nroot\nM 100644 inline README\ndata %d\n%s\n", i, len(content), content)
	}
	cmd := exec.Command("git", "--git-dir", dir, "fast-import", "--quiet")
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v: %s", err, out)
	}
	out, err := exec.Command("git", "--git-dir", dir, "for-each-ref", "--format=%(objectname)", "refs/heads/").Output()
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Fields(string(out))
	if len(ids) != n {
		t.Fatalf("%d branches in the template, want %d", len(ids), n)
	}
	return ids
}

// copyTemplate copies the template repository to dir, with main at
// commit as its only branch.
func copyTemplate(t *testing.T, template, dir, commit string) {
	t.Helper()
	err := filepath.WalkDir(template, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(template, p)
		if rel == "packed-refs" || strings.HasPrefix(rel, filepath.Join("refs", "heads")+string(filepath.Separator)) {
			return nil
		}
		to := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "refs", "heads", "main"), []byte(commit+"\n"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}
