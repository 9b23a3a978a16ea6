package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// The fork network of the test: eight forks of one synthetic repository
// of some MB, each with a commit of its own, among a few standalone
// repositories. Eight checks what twenty did (forks declared and found by
// their roots, forks added later, removed and re-added, the network moved
// whole) at two fifths of the clones, pulls and fscks. A network larger than half the smallest node's bound is
// split; the coordinator's --load-factor (netLoadFactor) keeps the bound
// of the two owning nodes above twice the network, so that it is placed
// whole without a hundred standalone repositories to clone.
//
// With GITFLEET_E2E_NETWORK_BASE naming a bare repository (a real one: a
// mirror of a project), the base is a copy of its branches and tags
// instead, and the forks are made on top of its HEAD branch.
const (
	netBaseEnv    = "GITFLEET_E2E_NETWORK_BASE"
	netForks      = 8
	netSolos      = 6
	netLoadFactor = "3"
	netName       = "forks"
	netOwnSize    = 32 << 10 // each fork's own file: incompressible random bytes
)

func netForkName(i int) string { return fmt.Sprintf("net/fork-%02d", i) }
func netSoloName(i int) string { return fmt.Sprintf("solo/r-%02d", i) }

// netRepo is a repository as the API shows it, with its network.
type netRepo struct {
	Key          string `json:"key"`
	Owner        uint32 `json:"owner_node"`
	Served       bool   `json:"served"`
	Network      string `json:"network"`
	NetworkParts uint32 `json:"network_parts"`
}

func netRepos(base string) (map[string]netRepo, error) {
	resp, err := http.Get(base + "/api/v1/repos?limit=1000")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Repos []netRepo `json:"repos"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	out := map[string]netRepo{}
	for _, r := range body.Repos {
		out[r.Key] = r
	}
	return out, nil
}

// copyBase makes the bare repository name a copy of the branches and
// tags of the bare repository src (only read), its HEAD the branch src's
// HEAD names, packed as a server would. It returns that branch.
func copyBase(t *testing.T, up *gittest.Upstreams, name, src string) string {
	t.Helper()
	head, err := gittest.Output("", "--git-dir="+src, "symbolic-ref", "--short", "HEAD")
	if err != nil {
		t.Fatalf("%s=%s: the base's HEAD must name a branch: %v", netBaseEnv, src, err)
	}
	branch := strings.TrimSpace(head)
	bare := filepath.Join(up.Dir, name+".git")
	if err := gittest.Git("", "init", "-q", "--bare", "-b", branch, bare); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir="+bare, "fetch", "-q", "--no-tags", "--", src, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"); err != nil {
		t.Fatalf("copy of %s=%s: %v", netBaseEnv, src, err)
	}
	if err := gittest.Git("", "--git-dir="+bare, "rev-parse", "--verify", "-q", "refs/heads/"+branch); err != nil {
		t.Fatalf("%s=%s: HEAD names %s, which it does not have", netBaseEnv, src, branch)
	}
	if err := gittest.Git("", "--git-dir="+bare, "repack", "-adq"); err != nil {
		t.Fatal(err)
	}
	return branch
}

// synthBase makes the bare repository name: commits commits over files
// files (the first commit adds them all, each later one changes per of
// them) on main, in one git fast-import, then packs it as a server would.
func synthBase(t *testing.T, up *gittest.Upstreams, name string, commits, files, per int) {
	t.Helper()
	bare := filepath.Join(up.Dir, name+".git")
	if err := gittest.Git("", "init", "-q", "--bare", "-b", "main", bare); err != nil {
		t.Fatal(err)
	}
	var s strings.Builder
	for c := range commits {
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter A U Thor <a@example.org> %d +0000\ndata 11\ncommit %04d\n", 1700000000+c, c)
		n := per
		if c == 0 {
			n = files
		}
		for j := range n {
			f := (c*per + j) % files
			body := fmt.Sprintf("file %d at commit %d %s\n", f, c, strings.Repeat("x", 64))
			fmt.Fprintf(&s, "M 100644 inline dir%02d/file%05d.txt\ndata %d\n%s", f%50, f, len(body), body)
		}
		s.WriteString("\n")
	}
	s.WriteString("reset refs/tags/v1\nfrom refs/heads/main\n\n")
	fastImport(t, bare, s.String())
	if err := gittest.Git("", "--git-dir="+bare, "repack", "-adq"); err != nil {
		t.Fatal(err)
	}
}

func fastImport(t *testing.T, bare, stream string) {
	t.Helper()
	if err := gittest.FastImport(bare, stream); err != nil {
		t.Fatal(err)
	}
}

// forkWithOwnCommit makes name a fork of base (sharing its objects on the
// server's disk, as a forge's forks do) with a commit of its own on branch:
// a file of netOwnSize random bytes. It returns the size of the fork's own
// objects (the pack that commit made) and the commit's ID.
func forkWithOwnCommit(t *testing.T, up *gittest.Upstreams, base, branch, name string, i int) (int64, string) {
	t.Helper()
	bare := filepath.Join(up.Dir, name+".git")
	if err := gittest.Git("", "clone", "-q", "--bare", "--shared", filepath.Join(up.Dir, base+".git"), bare); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, netOwnSize)
	rand.Read(body)
	var s strings.Builder
	ref := "refs/heads/" + branch
	fmt.Fprintf(&s, "commit %s\ncommitter A U Thor <a@example.org> %d +0000\ndata 8\nfork %02d\nfrom %s^0\n", ref, 1800000000+i, i, ref)
	fmt.Fprintf(&s, "M 100644 inline own-%02d.bin\ndata %d\n%s\n", i, len(body), body)
	fastImport(t, bare, s.String())
	head, err := gittest.Output("", "--git-dir="+bare, "rev-parse", ref)
	if err != nil {
		t.Fatal(err)
	}
	// fast-import leaves so few objects loose: the fork's objects
	// directory holds only its own (the rest it borrows from the base).
	return dirBytes(filepath.Join(bare, "objects")), strings.TrimSpace(head)
}

// soloRepo makes the standalone upstream name: one commit of its own (a
// root no other repository has).
func soloRepo(t *testing.T, up *gittest.Upstreams, name string, i int) {
	t.Helper()
	bare := filepath.Join(up.Dir, name+".git")
	if err := gittest.Git("", "init", "-q", "--bare", "-b", "main", bare); err != nil {
		t.Fatal(err)
	}
	content := fmt.Sprintf("standalone repository %d\n", i)
	fastImport(t, bare, fmt.Sprintf("commit refs/heads/main\ncommitter A U Thor <a@example.org> 1700000000 +0000\ndata 5\nsolo\nM 100644 inline README\ndata %d\n%s\n",
		len(content), content))
}

// netCatalog lays out the catalog: the standalone repositories and the
// forks that are detected by their roots in a .list file, the declared
// forks as YAML entries with network: forks.
func (f *fleet) netCatalog(solos, declared, detected []int, msg string) {
	_ = os.RemoveAll(f.catalog + "/lists")
	_ = os.RemoveAll(f.catalog + "/net")
	var list strings.Builder
	for _, i := range solos {
		fmt.Fprintf(&list, "%s\n", f.up.RepoURL(netSoloName(i)))
	}
	for _, i := range detected {
		fmt.Fprintf(&list, "%s  # a fork, found by its roots\n", f.up.RepoURL(netForkName(i)))
	}
	f.writeFile("lists/all.list", list.String())
	for _, i := range declared {
		f.writeFile(fmt.Sprintf("net/fork-%02d", i), fmt.Sprintf("url: %s\nnetwork: %s\n", f.up.RepoURL(netForkName(i)), netName))
	}
	f.commitCatalog(msg)
}

// inOneNetwork checks that the API shows every fork in forks served, in
// the network netName, whole, and owned by one node; it returns the owner.
func (f *fleet) inOneNetwork(forks []int) (uint32, error) {
	api, err := netRepos(f.base)
	if err != nil {
		return 0, err
	}
	owners := map[uint32][]string{}
	for _, i := range forks {
		r, ok := api[f.keyOf(netForkName(i))]
		switch {
		case !ok:
			return 0, fmt.Errorf("%s is not in the API", netForkName(i))
		case r.Network != netName:
			return 0, fmt.Errorf("%s is in network %q, want %q", netForkName(i), r.Network, netName)
		case r.NetworkParts > 1:
			return 0, fmt.Errorf("%s: the network is split in %d parts", netForkName(i), r.NetworkParts)
		case !r.Served || r.Owner == 0:
			return 0, fmt.Errorf("%s is not served yet (owner %d)", netForkName(i), r.Owner)
		}
		owners[r.Owner] = append(owners[r.Owner], netForkName(i))
	}
	if len(owners) != 1 {
		return 0, fmt.Errorf("the network has %d owners: %v", len(owners), owners)
	}
	for o := range owners {
		return o, nil
	}
	return 0, nil
}

// forksServed checks that the full node serves every fork in forks with
// its upstream's branches and tags.
func (f *fleet) forksServed(forks []int) error {
	for _, i := range forks {
		want, err := f.up.Refs(netForkName(i))
		if err != nil {
			return err
		}
		got, err := lsRemote(f.base + "/" + f.keyOf(netForkName(i)) + ".git")
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("%s: served %v, upstream has %v", netForkName(i), got, want)
		}
	}
	return nil
}

// networkBytes is what the network takes on the disk of the node whose
// data directory is dir: its members' mirrors and its pools.
func (f *fleet) networkBytes(dir string) int64 {
	host := strings.TrimPrefix(f.up.URL, "http://")
	return dirBytes(filepath.Join(dir, "repos", host, "net")) + dirBytes(filepath.Join(dir, "pools"))
}

// wholeCopies names the forks whose mirror on the node whose data
// directory is dir holds more than limit bytes of objects of its own.
func (f *fleet) wholeCopies(dir string, limit int64) []string {
	var out []string
	for i := range netForks {
		if n := dirBytes(filepath.Join(dir, "repos", filepath.FromSlash(f.keyOf(netForkName(i)))+".git", "objects")); n > limit {
			out = append(out, fmt.Sprintf("%s (%d bytes)", netForkName(i), n))
		}
	}
	return out
}

// Eight forks of one repository of some MB, as one fork network on a
// fleet of real processes: some declared in the catalog (network: forks),
// some found by their shared root. Checked from outside: one owner; every
// fork served with its upstream's refs and cloned whole; each node's disk
// about one mirror plus the forks' own objects; the later forks download
// about their own objects from their upstreams; another fork's commit is
// not served through a member; removing, re-adding and moving members
// loses nothing.
//
// It stays one of the long tests (minutes): a base of some MB is made,
// cloned and pooled on two nodes, every fork is cloned, pulled and
// checked with fsck, and the network is placed three times (found by its
// roots, re-added, moved past the stopped owner's grace), each a round of
// clones. Eight forks keep two of each kind of member (declared, found
// by its roots, added later) while one declared and one found are
// removed; twenty checked the same at two and a half times the work.
func TestNetworkOfEightForksIsStoredOnceAndServedWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	began := time.Now()
	branch := "main"
	if src := os.Getenv(netBaseEnv); src != "" {
		branch = copyBase(t, f.up, "net/base", src)
	} else {
		synthBase(t, f.up, "net/base", 400, 3000, 30)
	}
	own := make([]int64, netForks)
	heads := make([]string, netForks)
	var allOwn int64
	for i := range netForks {
		own[i], heads[i] = forkWithOwnCommit(t, f.up, "net/base", branch, netForkName(i), i)
		allOwn += own[i]
	}
	for i := range netSolos {
		soloRepo(t, f.up, netSoloName(i), i)
	}
	// One mirror of the base, as a standalone clone of it stores it.
	oneMirror := filepath.Join(t.TempDir(), "one.git")
	if err := gittest.Git("", "clone", "-q", "--mirror", "--no-local", filepath.Join(f.up.Dir, "net/base.git"), oneMirror); err != nil {
		t.Fatal(err)
	}
	mirrorBytes := dirBytes(filepath.Join(oneMirror, "objects"))
	baseRefs, err := f.up.Refs("net/base")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upstreams made in %v: one mirror of the base %d bytes, %d branches and tags; the forks' own objects %d bytes",
		time.Since(began).Round(10*time.Millisecond), mirrorBytes, len(baseRefs), allOwn)
	// A real base takes longer to clone, to pool and to check: the waits
	// grow by one for every 16 MB of it.
	wait := func(d time.Duration) time.Duration { return d * time.Duration(1+mirrorBytes/(16<<20)) }

	solos := seq(0, netSolos)
	declared, detected, later := seq(0, 3), seq(3, 6), seq(6, netForks)
	first := seq(0, 6)
	f.netCatalog(solos, declared, detected, fmt.Sprintf("standalone repositories and %d forks", len(first)))
	f.coordArgs = []string{"--load-factor", netLoadFactor}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	// Nothing is pushed upstream in this test: checks every 5-10 s leave
	// the machine to the clones.
	intervals := []string{"--min-interval", "5s", "--max-interval", "10s"}
	// The full node owns nothing (capacity 0): the network's owner is a
	// partial node, which can be stopped to move it.
	f.startNode("full", "full", append([]string{"--http", f.http, "--tunnel", f.tunnelAddr, "--capacity", "0"}, intervals...)...)
	f.startNode("partial-1", "partial", intervals...)
	f.startNode("partial-2", "partial", intervals...)
	nodeByID := func(id uint32) string {
		for _, n := range []string{"partial-1", "partial-2"} {
			if ownerOfNode(t, f.dataDirs[n]) == id {
				return n
			}
		}
		t.Fatalf("node %d is not a partial node", id)
		return ""
	}

	eventually(t, wait(240*time.Second), fmt.Sprintf("the first %d forks served, in one network with one owner", len(first)), func() error {
		if err := f.forksServed(first); err != nil {
			return err
		}
		_, err := f.inOneNetwork(first)
		return err
	})

	// The later forks are declared: each is cloned with the network's pool
	// as haves, and downloads about its own objects.
	// Each time a node lists a fork's refs (a check, a fetch) the upstream
	// sends them all: with the hundreds of tags of a real base that is
	// more than the fork's own objects. One listing, as ls-remote asks
	// for it, is measured here and allowed for each listing made.
	listingBytes := map[int]int64{}
	sentBefore := map[int]int64{}
	listingsBefore := map[int]int{}
	for _, i := range later {
		sent := f.up.Sent(netForkName(i))
		if _, err := lsRemote(f.up.RepoURL(netForkName(i))); err != nil {
			t.Fatal(err)
		}
		listingBytes[i] = f.up.Sent(netForkName(i)) - sent
		sentBefore[i] = f.up.Sent(netForkName(i))
		listingsBefore[i] = f.up.Listings(netForkName(i))
	}
	all := seq(0, netForks)
	f.netCatalog(solos, append(declared, later...), detected, fmt.Sprintf("%d more forks", len(later)))
	var owner uint32
	eventually(t, wait(120*time.Second), fmt.Sprintf("all %d forks served, in one network with one owner", netForks), func() error {
		if err := f.forksServed(all); err != nil {
			return err
		}
		var err error
		owner, err = f.inOneNetwork(all)
		return err
	})
	for _, i := range later {
		sent := f.up.Sent(netForkName(i)) - sentBefore[i]
		listings := f.up.Listings(netForkName(i)) - listingsBefore[i]
		refBytes := int64(listings) * listingBytes[i]
		t.Logf("%s: downloaded %d bytes from its upstream (its own objects: %d; %d ref listings of %d bytes; one mirror: %d)",
			netForkName(i), sent, own[i], listings, listingBytes[i], mirrorBytes)
		if sent > 2*own[i]+64<<10+refBytes {
			t.Errorf("%s downloaded %d bytes from its upstream: more than its own objects (%d), its %d ref listings (%d bytes) and their requests",
				netForkName(i), sent, own[i], listings, refBytes)
		}
	}

	// The disk: one mirror plus the forks' own objects on the owner and on
	// the full node (without pools it would be netForks mirrors).
	ownerName := nodeByID(owner)
	ideal := mirrorBytes + allOwn
	diskOK := func(nodes ...string) func() error {
		return func() error {
			for _, n := range nodes {
				if got := f.networkBytes(f.dataDirs[n]); float64(got) > 1.5*float64(ideal) {
					return fmt.Errorf("%s: the network takes %d bytes, %.2f× one mirror plus the forks' own objects (%d); %d mirrors would be %d; members holding more than half a mirror: %v",
						n, got, float64(got)/float64(ideal), ideal, netForks, netForks*mirrorBytes+allOwn, f.wholeCopies(f.dataDirs[n], mirrorBytes/2))
				}
			}
			return nil
		}
	}
	// Pools settle after the members' last fetches (a member repacks
	// against the pool after it shared its objects).
	eventually(t, wait(30*time.Second), "the network takes about one mirror plus the forks' own objects on its owner and the full node", diskOK(ownerName, "full"))
	for _, n := range []string{ownerName, "full"} {
		got := f.networkBytes(f.dataDirs[n])
		t.Logf("%s: the network takes %d bytes: %.2f× one mirror plus own (%d), %.3f× %d mirrors", n, got, float64(got)/float64(ideal), ideal, float64(got)/float64(netForks*mirrorBytes+allOwn), netForks)
	}

	// Another fork's own commit is not served through a member; the
	// member's own is.
	want := t.TempDir()
	if err := gittest.Git("", "init", "-q", "--bare", want); err != nil {
		t.Fatal(err)
	}
	memberURL := f.base + "/" + f.keyOf(netForkName(0)) + ".git"
	if err := gittest.Git("", "--git-dir="+want, "fetch", "-q", memberURL, heads[1]); err == nil {
		t.Errorf("a want of %s's own commit %s through %s was served", netForkName(1), heads[1], netForkName(0))
	}
	if err := gittest.Git("", "--git-dir="+want, "fetch", "-q", memberURL, heads[0]); err != nil {
		t.Errorf("a want of the member's own commit was refused: %v", err)
	}

	// Removing members (one declared, one found by its roots) keeps the
	// others whole; re-adding them brings them back.
	removedDeclared, removedDetected := 1, 4
	keep := func(from []int, gone ...int) []int {
		var out []int
		for _, i := range from {
			if !slices.Contains(gone, i) {
				out = append(out, i)
			}
		}
		return out
	}
	f.netCatalog(solos, keep(append(declared, later...), removedDeclared), keep(detected, removedDetected), "remove two forks")
	for _, i := range []int{removedDeclared, removedDetected} {
		url := f.base + "/" + f.keyOf(netForkName(i)) + ".git/info/refs?service=git-upload-pack"
		eventually(t, wait(30*time.Second), netForkName(i)+" removed", func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				return fmt.Errorf("%s: status %d, want 404", netForkName(i), resp.StatusCode)
			}
			return nil
		})
	}
	remaining := keep(all, removedDeclared, removedDetected)
	if err := f.forksServed(remaining); err != nil {
		t.Fatalf("after removing two members: %v", err)
	}
	// The pool on the full node kept what the others need (they are
	// cloned from it at the end).
	if err := f.heldWhole("full", remaining); err != nil {
		t.Fatalf("after removing two members: %v", err)
	}
	f.netCatalog(solos, append(declared, later...), detected, "the two forks again")
	eventually(t, wait(120*time.Second), "the re-added forks served in the network", func() error {
		if err := f.forksServed(all); err != nil {
			return err
		}
		_, err := f.inOneNetwork(all)
		return err
	})

	// Moving: the owner stops; past its grace the network moves whole to
	// the other partial node, seeded from the full node's copy.
	f.procs[ownerName].stop()
	eventually(t, wait(120*time.Second), "the network moved whole to the other partial node", func() error {
		o, err := f.inOneNetwork(all)
		if err != nil {
			return err
		}
		if o == owner {
			return fmt.Errorf("still owned by the stopped node %d", o)
		}
		return nil
	})
	eventually(t, wait(120*time.Second), "the new owner holds every fork whole", func() error {
		return f.heldWhole(nodeByID(mustOwner(t, f, all)), all)
	})
	if err := f.forksServed(all); err != nil {
		t.Fatal(err)
	}
	f.clonesWhole(t, all)
	newOwner := nodeByID(mustOwner(t, f, all))
	eventually(t, wait(30*time.Second), "the network takes about one mirror plus the forks' own objects on the new owner", diskOK(newOwner))
	got := f.networkBytes(f.dataDirs[newOwner])
	t.Logf("%s (the new owner): the network takes %d bytes: %.2f× one mirror plus own (%d), %.3f× %d mirrors", newOwner, got, float64(got)/float64(ideal), ideal, float64(got)/float64(netForks*mirrorBytes+allOwn), netForks)
	t.Logf("the test took %v", time.Since(began).Round(10*time.Millisecond))
}

func mustOwner(t *testing.T, f *fleet, forks []int) uint32 {
	t.Helper()
	o, err := f.inOneNetwork(forks)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// clonesWhole clones every fork in forks from the full node and checks the
// clone with git fsck.
func (f *fleet) clonesWhole(t *testing.T, forks []int) {
	t.Helper()
	for _, i := range forks {
		dst := filepath.Join(t.TempDir(), "clone")
		if err := gittest.Git("", "clone", "-q", "--bare", f.base+"/"+f.keyOf(netForkName(i))+".git", dst); err != nil {
			t.Fatalf("clone of %s: %v", netForkName(i), err)
		}
		if out, err := exec.Command("git", "--git-dir", dst, "fsck", "--no-dangling").CombinedOutput(); err != nil {
			t.Fatalf("the clone of %s fails fsck: %v\n%s", netForkName(i), err, out)
		}
		os.RemoveAll(dst)
	}
}

// heldWhole checks that node holds every fork in forks on its disk with its
// upstream's refs and every object they reach (through its pool).
func (f *fleet) heldWhole(node string, forks []int) error {
	for _, i := range forks {
		dir := filepath.Join(f.dataDirs[node], "repos", filepath.FromSlash(f.keyOf(netForkName(i)))+".git")
		got, err := gittest.RefsOf(dir)
		if err != nil {
			return err
		}
		want, err := f.up.Refs(netForkName(i))
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("%s holds %s with %v, upstream has %v", node, netForkName(i), got, want)
		}
		if out, err := exec.Command("git", "--git-dir", dir, "fsck", "--connectivity-only", "--no-dangling").CombinedOutput(); err != nil {
			return fmt.Errorf("%s's copy of %s fails fsck: %v\n%s", node, netForkName(i), err, out)
		}
	}
	return nil
}
