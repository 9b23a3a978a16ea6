package mirror_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// sharedSize is the incompressible history every fork of bigNetwork
// shares; ownSize, what each adds of its own.
const (
	sharedSize = 512 << 10
	ownSize    = 32 << 10
)

// bigNetwork makes an upstream "base" (two branches, a tag, and sharedSize
// random bytes on main) and n forks of it, each with a commit of ownSize
// random bytes of its own on main, and returns the forks' names.
func bigNetwork(t *testing.T, up *gittest.Upstreams, n int) []string {
	t.Helper()
	if err := up.Create("base", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := up.AddBlob("base", "main", sharedSize); err != nil {
		t.Fatal(err)
	}
	var forks []string
	for i := range n {
		name := fmt.Sprintf("fork%d", i)
		if err := up.Fork("base", name); err != nil {
			t.Fatal(err)
		}
		ownCommit(t, filepath.Join(up.Dir, name+".git"), i)
		forks = append(forks, name)
	}
	return forks
}

// upstreamOf lists name's refs at the upstream itself, as the full node
// asks it to verify a pull.
func upstreamOf(up *gittest.Upstreams, name string) mirror.UpstreamRefs {
	git := gitcmd.New(gitcmd.Direct(), gitcmd.Options{})
	return func(ctx context.Context, names []string) (gitcmd.Refs, error) {
		return git.LsRemoteRefs(ctx, up.RepoURL(name), names)
	}
}

// snapshot is what a repository directory holds: every file's size under
// objects/ and every ref, so that a test can tell it was not written to.
func snapshot(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	err := filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m[p] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := gittest.Output("", "--git-dir="+dir, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(refs), "\n") {
		m["ref "+line] = 0
	}
	return m
}

// hasObject tells whether the repository at dir (through its alternates)
// holds oid.
func hasObject(dir, oid string) bool {
	return gittest.Git("", "--git-dir="+dir, "cat-file", "-e", oid) == nil
}

func TestAPullOfAMemberFromItsOwnerBringsOnlyWhatItAloneHas(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := bigNetwork(t, up, 4)
	// The owner is honest: it serves what the upstream has.
	owner, pulled := countingProxy(t, up.URL)
	defer owner.Close()
	ctx := context.Background()
	pull := func(st *mirror.Store, f, network string) int64 {
		t.Helper()
		pulled.Store(0)
		key := keyOf(t, up.RepoURL(f))
		res, err := st.PullVerifiedIn(ctx, key, network, mirror.Source{URL: owner.URL + "/" + f + ".git"}, upstreamOf(up, f))
		if err != nil {
			t.Fatalf("pull %s: %v", f, err)
		}
		if want, _ := up.Refs(f); !res.Changed || !reflect.DeepEqual(res.After.Refs, want) {
			t.Fatalf("pull %s: %+v, want refs %v", f, res, want)
		}
		if st.Network(key) != network {
			t.Fatalf("%s: network %q after the pull, want %q", f, st.Network(key), network)
		}
		fsck(t, st.Path(key))
		return pulled.Load()
	}

	// Without a network, a fork costs its whole history.
	_, solo := setup(t)
	standalone := pull(solo, forks[1], "")

	var bytes []int64
	for _, f := range forks {
		bytes = append(bytes, pull(st, f, "base"))
	}
	pool := st.PoolPath("base")
	fsck(t, pool)
	for _, f := range forks {
		if n := localObjects(t, st.Path(keyOf(t, up.RepoURL(f)))); n != 0 {
			t.Fatalf("%s keeps %d objects of its own after its pull was shared with the pool", f, n)
		}
	}
	if bytes[0] < sharedSize || standalone < sharedSize {
		t.Fatalf("the first member pulled %d bytes, a standalone fork %d: want each at least the shared %d", bytes[0], standalone, sharedSize)
	}
	for i, n := range bytes[1:] {
		// Its own objects (ownSize, incompressible) and the protocol's
		// talk; nothing of the shared history.
		if n > 2*ownSize {
			t.Fatalf("member %d pulled %d bytes through the owner's tunnel, want about its own %d (the first pulled %d, a standalone fork %d)",
				i+1, n, ownSize, bytes[0], standalone)
		}
	}
	t.Logf("pulled: first member %d bytes, later members %v, a standalone fork %d", bytes[0], bytes[1:], standalone)

	// The network's upstreams move together (every fork's main becomes
	// the base's new main): the members' next pulls bring it once.
	if _, err := up.AddBlob("base", "main", sharedSize); err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		if err := gittest.Git("", "--git-dir="+filepath.Join(up.Dir, f+".git"), "fetch", "-q",
			filepath.Join(up.Dir, "base.git"), "+refs/heads/main:refs/heads/main"); err != nil {
			t.Fatal(err)
		}
	}
	bytes = bytes[:0]
	for _, f := range forks {
		bytes = append(bytes, pull(st, f, "base"))
	}
	if bytes[0] < sharedSize {
		t.Fatalf("the first member's update pulled %d bytes, want at least the new shared %d", bytes[0], sharedSize)
	}
	for i, n := range bytes[1:] {
		if n > ownSize {
			t.Fatalf("member %d's update pulled %d bytes, want only the protocol's talk (the first pulled %d)", i+1, n, bytes[0])
		}
	}
	t.Logf("updates pulled: first member %d bytes, later members %v", bytes[0], bytes[1:])
}

// hostileOwner is a volunteer's copy of forks (mirrors of the upstream's),
// served over HTTP, which the test then forges.
type hostileOwner struct {
	t   *testing.T
	up  *gittest.Upstreams
	src *gittest.Upstreams
}

func newHostileOwner(t *testing.T, up *gittest.Upstreams, forks []string) *hostileOwner {
	t.Helper()
	src, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	h := &hostileOwner{t: t, up: up, src: src}
	for _, f := range forks {
		if err := gittest.Git("", "clone", "-q", "--mirror", filepath.Join(up.Dir, f+".git"), h.dir(f)); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *hostileOwner) dir(f string) string { return filepath.Join(h.src.Dir, f+".git") }

// forge commits a new file on main of the owner's copy of f only and
// returns the forged tip.
func (h *hostileOwner) forge(f string) string {
	h.t.Helper()
	wt := filepath.Join(h.t.TempDir(), "forge")
	if err := gittest.Git("", "clone", "-q", "-b", "main", h.dir(f), wt); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt, "forged.txt"), []byte("forged\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := gittest.Git(wt, "add", "forged.txt"); err != nil {
		h.t.Fatal(err)
	}
	if err := gittest.Git(wt, "commit", "-q", "-m", "forged"); err != nil {
		h.t.Fatal(err)
	}
	if err := gittest.Git(wt, "push", "-q", "origin", "main"); err != nil {
		h.t.Fatal(err)
	}
	out, err := gittest.Output(wt, "rev-parse", "HEAD")
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// point sets main of the owner's copy of f to another fork's main: a
// forged tip whose objects exist (in the upstream, and in the pool).
func (h *hostileOwner) point(f, other string) string {
	h.t.Helper()
	if err := gittest.Git("", "--git-dir="+h.dir(f), "fetch", "-q", h.dir(other), "+refs/heads/main:refs/heads/main"); err != nil {
		h.t.Fatal(err)
	}
	out, err := gittest.Output("", "--git-dir="+h.dir(f), "rev-parse", "refs/heads/main")
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// honest makes the owner's copy of f the upstream's again.
func (h *hostileOwner) honest(f string) {
	h.t.Helper()
	if err := gittest.Git("", "--git-dir="+h.dir(f), "fetch", "-q", "--prune", filepath.Join(h.up.Dir, f+".git"),
		"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"); err != nil {
		h.t.Fatal(err)
	}
}

func TestAForgedPullOfAMemberLeavesItsPoolUntouched(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := bigNetwork(t, up, 2)
	owner := newHostileOwner(t, up, forks)
	ctx := context.Background()
	keys := []repokey.Key{keyOf(t, up.RepoURL(forks[0])), keyOf(t, up.RepoURL(forks[1]))}
	pull := func(i int) (mirror.Result, error) {
		return st.PullVerifiedIn(ctx, keys[i], "base", mirror.Source{URL: owner.src.RepoURL(forks[i])}, upstreamOf(up, forks[i]))
	}
	if _, err := pull(0); err != nil {
		t.Fatal(err)
	}
	pool := st.PoolPath("base")
	untouched := func(what string, before map[string]int64) {
		t.Helper()
		if after := snapshot(t, pool); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the pool changed:\nbefore %v\nafter  %v", what, before, after)
		}
		ents, err := os.ReadDir(filepath.Join(filepath.Dir(st.Root()), "tmp"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if len(ents) > 0 {
			t.Fatalf("%s: left in tmp: %v", what, ents)
		}
	}

	// A first pull of a new member, from an owner that forged its main:
	// a new commit, then another member's commit (which the pool holds).
	before := snapshot(t, pool)
	forged := owner.forge(forks[1])
	mismatchOf(t, second(pull(1)))
	if st.Has(keys[1]) {
		t.Fatal("a forged first pull made a mirror")
	}
	if hasObject(pool, forged) {
		t.Fatal("the forged commit entered the pool")
	}
	untouched("a forged first pull", before)
	borrowed := owner.point(forks[1], forks[0])
	if !hasObject(pool, borrowed) {
		t.Fatalf("the other member's commit %s is not in the pool", borrowed)
	}
	mismatchOf(t, second(pull(1)))
	if st.Has(keys[1]) {
		t.Fatal("a first pull whose tip is another member's commit made a mirror")
	}
	untouched("a first pull whose tip is another member's commit", before)

	// The member's honest pull, then forged ones of it.
	owner.honest(forks[1])
	if _, err := pull(1); err != nil {
		t.Fatal(err)
	}
	served, err := st.Refs(ctx, keys[1])
	if err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, pool)
	member := snapshot(t, st.Path(keys[1]))
	forged = owner.forge(forks[1])
	mismatchOf(t, second(pull(1)))
	if hasObject(pool, forged) || hasObject(st.Path(keys[1]), forged) {
		t.Fatal("the forged commit entered the member or its pool")
	}
	untouched("a forged pull of a member", before)
	owner.honest(forks[1])
	owner.point(forks[1], forks[0])
	mismatchOf(t, second(pull(1)))
	untouched("a pull of a member whose tip is another member's commit", before)
	if after := snapshot(t, st.Path(keys[1])); !reflect.DeepEqual(after, member) {
		t.Fatalf("the refused pulls changed the member:\nbefore %v\nafter  %v", member, after)
	}
	if now, err := st.Refs(ctx, keys[1]); err != nil || !reflect.DeepEqual(now.Refs, served.Refs) {
		t.Fatalf("the member's refs moved: %v (%v), want %v", now.Refs, err, served.Refs)
	}
	fsck(t, st.Path(keys[1]))
}

func second[T any](_ T, err error) error { return err }

// fullNodeServer serves the mirrors of st as a full node does (gitserve,
// members through their pool), behind a proxy that counts what it sent.
func fullNodeServer(t testing.TB, st *mirror.Store) (string, *atomic.Int64) {
	t.Helper()
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Resolve: func(key repokey.Key) (string, bool) {
		return st.Path(key), st.Has(key)
	}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	proxy, n := countingProxy(t, srv.URL)
	t.Cleanup(proxy.Close)
	return proxy.URL, n
}

func TestASeedFromTheFullNodeSendsANetworksPoolOnce(t *testing.T) {
	t.Parallel()
	up, full := setup(t)
	forks := bigNetwork(t, up, 4)
	keys := syncForks(t, full, up, forks, "base")
	seedBase, sent := fullNodeServer(t, full)
	_, owner := setup(t)
	ctx := context.Background()
	var bytes []int64
	for i, key := range keys {
		sent.Store(0)
		// As node.check seeds a repository that moved to it.
		res, err := owner.SyncIn(ctx, key, seedBase+"/"+string(key)+".git", "base")
		if err != nil {
			t.Fatalf("seed %s: %v", forks[i], err)
		}
		if want, _ := up.Refs(forks[i]); !res.Cloned || !reflect.DeepEqual(res.After.Refs, want) {
			t.Fatalf("seed %s: %+v, want refs %v", forks[i], res, want)
		}
		bytes = append(bytes, sent.Load())
		fsck(t, owner.Path(key))
		// The upstream is then asked for what is newer: nothing.
		if res, err := owner.SyncIn(ctx, key, up.RepoURL(forks[i]), "base"); err != nil || res.Changed {
			t.Fatalf("the upstream after the seed of %s: %+v, %v", forks[i], res, err)
		}
	}
	fsck(t, owner.PoolPath("base"))
	if bytes[0] < sharedSize {
		t.Fatalf("the first member's seed sent %d bytes, want at least the shared %d", bytes[0], sharedSize)
	}
	for i, n := range bytes[1:] {
		if n > 2*ownSize {
			t.Fatalf("member %d's seed sent %d bytes, want about its own %d (the first sent %d)", i+1, n, ownSize, bytes[0])
		}
	}
	t.Logf("seeded: first member %d bytes, later members %v", bytes[0], bytes[1:])
}
