package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// fleet is a coordinator, a full node and two partial nodes, each its own
// process with its own data directory, mirroring upstreams on 127.0.0.1.
type fleet struct {
	t          testing.TB
	up         *gittest.Upstreams
	catalog    string
	catalogURL string // where the coordinator fetches the catalog from ("": the catalog's directory)
	grpc       string
	http       string
	tunnelAddr string
	base       string
	token      string
	fullToken  string // the coordinator's and the full node's, never a partial node's
	dataDirs   map[string]string
	coordArgs  []string // more flags of the coordinator
	procs      map[string]*proc
}

func newFleet(t testing.TB) *fleet {
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	f := &fleet{t: t, up: up, catalog: filepath.Join(t.TempDir(), "catalog"), grpc: freeAddr(t), http: freeAddr(t),
		token: "e2e-secret-token", fullToken: "e2e-full-token", dataDirs: map[string]string{}, procs: map[string]*proc{}}
	f.base = "http://" + f.http
	return f
}

func (f *fleet) name(i int) string { return fmt.Sprintf("team%d/project-%02d", i%3, i) }

// seed creates the upstreams of repos, each with a main branch and a v1
// tag, and commits a catalog that lists them.
func (f *fleet) seed(repos []int, msg string) {
	f.t.Helper()
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, []string{"v1"}); err != nil {
			f.t.Fatal(err)
		}
	}
	f.writeCatalog(repos, msg)
}

// writeCatalog lays out the catalog in both file forms: most URLs in two
// .list files (with comments and blank lines), some as YAML entries with
// url: as a string or as a list.
func (f *fleet) writeCatalog(repos []int, msg string) {
	t := f.t
	if err := os.RemoveAll(filepath.Join(f.catalog, "lists")); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(filepath.Join(f.catalog, "p"))
	lists := [2]strings.Builder{}
	for j := range lists {
		fmt.Fprintf(&lists[j], "# upstreams, part %d\n\n", j+1)
	}
	// Bad input: a malformed line and a forbidden scheme are skipped with
	// their file and line; an upstream that does not exist is reported.
	lists[0].WriteString("this is not a url\nftp://example.org/x.git\n")
	fmt.Fprintf(&lists[1], "%s\n", f.up.RepoURL(missingUpstream))
	for _, i := range repos {
		url := f.up.RepoURL(f.name(i))
		switch i % 5 {
		case 0: // YAML, url as a list (the first is the upstream, the rest fallbacks)
			f.writeFile(fmt.Sprintf("p/project-%02d/project-%02d", i, i), fmt.Sprintf("url:\n- %s\n- %s\nsubmit: yes\n", url, url))
		case 1: // YAML, url as a string
			f.writeFile(fmt.Sprintf("p/project-%02d/project-%02d", i, i), fmt.Sprintf("url: %s\n", url))
		default:
			fmt.Fprintf(&lists[i%2], "%s  # project %d\n", url, i)
		}
	}
	for j := range lists {
		f.writeFile(fmt.Sprintf("lists/part-%d.list", j+1), lists[j].String())
	}
	f.writeFile("README.md", "# the e2e catalog\n")
	f.commitCatalog(msg)
}

// missingUpstream is the name of the upstream that writeCatalog lists and
// the git server does not have.
const missingUpstream = "does/not-exist"

// catalogKeys is the keys of the catalog that writeCatalog(repos) lays out.
func (f *fleet) catalogKeys(repos []int) []string {
	keys := []string{f.keyOf(missingUpstream)}
	for _, i := range repos {
		keys = append(keys, f.key(i))
	}
	return keys
}

// commitCatalog commits the catalog's files as they are, making it a
// repository first if it is not one.
func (f *fleet) commitCatalog(msg string) {
	t := f.t
	if _, err := os.Stat(filepath.Join(f.catalog, ".git")); err != nil {
		if err := gittest.Git("", "init", "-q", "-b", "main", f.catalog); err != nil {
			t.Fatal(err)
		}
	}
	if err := gittest.Git(f.catalog, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.catalog, "commit", "-q", "-m", msg); err != nil {
		t.Fatal(err)
	}
}

// serveCatalog has the coordinator fetch the catalog over HTTP from the
// upstreams' git server, as an operator's catalog repository would be: a
// bare copy of the catalog as it is now.
func (f *fleet) serveCatalog() {
	if err := gittest.Git("", "clone", "-q", "--bare", f.catalog, filepath.Join(f.up.Dir, "fleet", "catalog.git")); err != nil {
		f.t.Fatal(err)
	}
	f.catalogURL = f.up.RepoURL("fleet/catalog")
}

func (f *fleet) writeFile(rel, content string) {
	p := filepath.Join(f.catalog, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) key(i int) string { return f.keyOf(f.name(i)) }

// keyOf is the key of the upstream named name.
func (f *fleet) keyOf(name string) string {
	return strings.TrimSuffix(strings.TrimPrefix(f.up.RepoURL(name), "http://"), ".git")
}

// common are the flags of every coordinator of the fleet.
func (f *fleet) common() []string {
	return append(f.nodeCommon(), "--heartbeat", "500ms")
}

// nodeCommon are the flags of every node of the fleet: those of the
// coordinators that nodes take too (the heartbeat is the coordinator's to
// set, and a node takes only its own flags).
func (f *fleet) nodeCommon() []string {
	return []string{"--join-token", f.token, "--allow-private-upstreams", "--log-level", "debug"}
}

func (f *fleet) startCoordinator() {
	dir := f.dataDir("coordinator")
	catalog := f.catalog
	if f.catalogURL != "" {
		catalog = f.catalogURL
	}
	args := append([]string{"coordinator", "--data", dir, "--catalog", catalog, "--grpc", f.grpc,
		"--grace", "5s", "--warmup", "3s", "--warmup-nodes", "3", "--catalog-interval", "1s", "--max-purge", "0.2",
		"--full-token", f.fullToken}, f.common()...)
	args = append(args, f.coordArgs...)
	f.procs["coordinator"] = start(f.t, "coordinator", args...)
}

func (f *fleet) startNode(name, mode string, extra ...string) {
	dir := f.dataDir(name)
	args := append([]string{"node", "--mode", mode, "--name", name, "--data", dir, "--coordinator", f.grpc,
		// Checks every 1-3 s of 30 repositories keep pushes arriving within
		// seconds without the nodes' own git processes starving the machine.
		"--max-interval", "3s", "--min-interval", "1s", "--fetchers", "3"}, f.nodeCommon()...)
	if mode == "full" {
		args = append(args, "--full-token", f.fullToken)
	}
	args = append(args, extra...)
	f.procs[name] = start(f.t, name, args...)
}

func (f *fleet) dataDir(name string) string {
	if d, ok := f.dataDirs[name]; ok {
		return d
	}
	d := filepath.Join(f.t.TempDir(), name)
	f.dataDirs[name] = d
	return d
}

// servedLikeUpstream checks that the full node serves every repository in
// repos with exactly the upstream's branches and tags.
func (f *fleet) servedLikeUpstream(repos []int) error {
	for _, i := range repos {
		want, err := f.up.Refs(f.name(i))
		if err != nil {
			return err
		}
		got, err := lsRemote(f.base + "/" + f.key(i) + ".git")
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("%s: full node serves %v, upstream has %v", f.key(i), got, want)
		}
	}
	return nil
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestFleetMirrorsCatalogEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	for i := 0; i < 35; i++ {
		if err := f.up.Create(f.name(i), []string{"main", "dev", "release"}, []string{"v1.0", "v1.1"}); err != nil {
			t.Fatal(err)
		}
	}
	initial := seq(0, 30)
	f.writeCatalog(initial, "30 repositories")

	// A partial node started before its coordinator retries until it connects.
	f.startNode("partial-1", "partial")
	time.Sleep(time.Second)
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr)
	f.startNode("partial-2", "partial")

	eventually(t, 90*time.Second, "all 30 repositories served with the upstream's refs", func() error {
		return f.servedLikeUpstream(initial)
	})
	repos, err := apiRepos(f.base)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[uint32]int{}
	for _, i := range initial {
		r, ok := repos[f.key(i)]
		if !ok {
			t.Fatalf("API does not list %s", f.key(i))
		}
		owners[r.Owner]++
	}
	if len(owners) < 3 {
		t.Fatalf("repositories should be spread over the full node and both partial nodes, owners: %v", owners)
	}

	t.Run("a missing upstream is reported and the rest are not slowed", func(t *testing.T) {
		missing := f.keyOf(missingUpstream)
		eventually(t, 30*time.Second, "missing upstream reported", func() error {
			repos, err := apiRepos(f.base)
			if err != nil {
				return err
			}
			r := repos[missing]
			// The class the owner said, relayed by the coordinator to the full
			// node: the public sees it as the error.
			if r.State != "failing" && r.State != "deleted" || r.Error != "not found" || r.Class != "not found" {
				return fmt.Errorf("missing upstream shown as %+v", r)
			}
			return nil
		})
		// Five HTTP 404 answers in a row: parked as deleted (and rechecked daily).
		eventually(t, 60*time.Second, "missing upstream marked deleted", func() error {
			repos, err := apiRepos(f.base)
			if err != nil {
				return err
			}
			if r := repos[missing]; r.State != "deleted" {
				return fmt.Errorf("missing upstream shown as %+v", r)
			}
			return nil
		})
		log, _ := os.ReadFile(f.procs["coordinator"].log)
		for _, want := range []string{"lists/part-1.list:3", "lists/part-1.list:4"} {
			if !strings.Contains(string(log), want) {
				t.Errorf("coordinator log does not name the bad line %s", want)
			}
		}
	})

	t.Run("a wrong join token is refused with a clear message", func(t *testing.T) {
		cmd := exec.Command(binary, "node", "--mode", "partial", "--data", t.TempDir(), "--coordinator", f.grpc, "--join-token", "wrong")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatal("a node with a wrong join token kept running or succeeded")
		}
		if !strings.Contains(string(out), "join token") {
			t.Fatalf("no clear message:\n%s", out)
		}
	})

	t.Run("new commits reach the full node", func(t *testing.T) {
		for _, i := range []int{1, 7, 12, 20, 29} {
			if _, err := f.up.Commit(f.name(i), "dev"); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 60*time.Second, "pushed commits served", func() error { return f.servedLikeUpstream(initial) })
	})

	t.Run("catalog additions appear and removals disappear everywhere", func(t *testing.T) {
		next := append(seq(2, 30), 30, 31, 32) // 0 and 1 removed, 30-32 added
		f.writeCatalog(next, "add 3, remove 2")
		eventually(t, 60*time.Second, "added repositories served", func() error { return f.servedLikeUpstream([]int{30, 31, 32}) })
		for _, i := range []int{0, 1} {
			key := f.key(i)
			eventually(t, 30*time.Second, "removed repository gone", func() error {
				resp, err := http.Get(f.base + "/" + key + ".git/info/refs?service=git-upload-pack")
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					return fmt.Errorf("%s: status %d, want 404", key, resp.StatusCode)
				}
				for name, dir := range f.dataDirs {
					if _, err := os.Stat(filepath.Join(dir, "repos", filepath.FromSlash(key)+".git")); err == nil {
						return fmt.Errorf("%s still on disk of %s", key, name)
					}
				}
				return nil
			})
		}
	})

	t.Run("a killed partial node's repositories move and stay fresh", func(t *testing.T) {
		repos, err := apiRepos(f.base)
		if err != nil {
			t.Fatal(err)
		}
		victimID := ownerOfNode(t, f.dataDirs["partial-1"])
		var victims []int
		for _, i := range append(seq(2, 30), 30, 31, 32) {
			if repos[f.key(i)].Owner == victimID {
				victims = append(victims, i)
			}
		}
		if len(victims) == 0 {
			t.Fatalf("partial-1 (node %d) owns nothing", victimID)
		}
		f.procs["partial-1"].kill()
		eventually(t, 60*time.Second, "victim's repositories re-owned", func() error {
			repos, err := apiRepos(f.base)
			if err != nil {
				return err
			}
			for _, i := range victims {
				if o := repos[f.key(i)].Owner; o == victimID || o == 0 {
					return fmt.Errorf("%s still owned by %d", f.key(i), o)
				}
			}
			return nil
		})
		// The survivors cloned the moved repositories from the full node's
		// copy, not from the upstream.
		repos, err = apiRepos(f.base)
		if err != nil {
			t.Fatal(err)
		}
		survivor := ownerOfNode(t, f.dataDirs["partial-2"])
		log, _ := os.ReadFile(f.procs["partial-2"].log)
		moved := 0
		for _, i := range victims {
			if repos[f.key(i)].Owner != survivor {
				continue
			}
			moved++
			if !strings.Contains(string(log), `msg="cloned from the full node" key=`+f.key(i)) {
				t.Errorf("%s moved to partial-2 but was not cloned from the full node", f.key(i))
			}
		}
		t.Logf("%d of %d moved repositories went to partial-2, the rest to the full node", moved, len(victims))
		for _, i := range victims[:min(3, len(victims))] {
			if _, err := f.up.Commit(f.name(i), "main"); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 60*time.Second, "updates to moved repositories served", func() error { return f.servedLikeUpstream(victims) })
	})

	t.Run("a full node killed in the middle of pulls restarts clean", func(t *testing.T) {
		live := append(seq(2, 30), 30, 31, 32)
		for round := 0; round < 3; round++ {
			for _, i := range live[round*8 : round*8+8] {
				if _, err := f.up.Commit(f.name(i), "main"); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Duration(300+200*round) * time.Millisecond)
			f.procs["full"].kill()
			f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr)
		}
		eventually(t, 90*time.Second, "full node caught up after being killed", func() error { return f.servedLikeUpstream(live) })
		for _, i := range live {
			dir := filepath.Join(f.dataDirs["full"], "repos", filepath.FromSlash(f.key(i))+".git")
			if out, err := exec.Command("git", "--git-dir", dir, "fsck", "--no-dangling").CombinedOutput(); err != nil {
				t.Fatalf("%s is broken after SIGKILLs: %v\n%s", f.key(i), err, out)
			}
		}
	})

	t.Run("a stock clone from the full node passes fsck", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "clone")
		if err := gittest.Git("", "clone", "-q", f.base+"/"+f.key(5)+".git", dst); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "-C", dst, "fsck", "--full", "--strict")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fsck: %v\n%s", err, out)
		}
		head, err := gittest.Output(dst, "rev-parse", "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := f.up.Refs(f.name(5))
		if strings.TrimSpace(head) != want["refs/heads/main"] {
			t.Fatalf("clone HEAD %s, upstream main %s", head, want["refs/heads/main"])
		}
	})
}

// ownerOfNode reads the node ID a node saved at registration.
func ownerOfNode(t *testing.T, dataDir string) uint32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var id uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), `{"node_id":%d`, &id); err != nil {
		t.Fatalf("node.json %s: %v", b, err)
	}
	return id
}
