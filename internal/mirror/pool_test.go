package mirror_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// network makes an upstream "base" (two branches, a tag) and n forks of
// it, each with a commit of its own on main, and returns the forks' names.
func network(t *testing.T, up *gittest.Upstreams, n int) []string {
	t.Helper()
	if err := up.Create("base", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := up.Commit("base", "main"); err != nil {
			t.Fatal(err)
		}
	}
	var forks []string
	for i := range n {
		name := fmt.Sprintf("fork%d", i)
		if err := up.Fork("base", name); err != nil {
			t.Fatal(err)
		}
		if _, err := up.Commit(name, "main"); err != nil {
			t.Fatal(err)
		}
		forks = append(forks, name)
	}
	return forks
}

// fsck checks the repository at dir whole (through its alternates).
func fsck(t *testing.T, dir string) {
	t.Helper()
	if err := gittest.Git("", "--git-dir="+dir, "fsck", "--no-progress", "--connectivity-only"); err != nil {
		t.Fatalf("fsck %s: %v", dir, err)
	}
}

// localObjects counts the objects stored in the repository at dir itself.
func localObjects(t *testing.T, dir string) int {
	t.Helper()
	out, err := gittest.Output("", "--git-dir="+dir, "count-objects", "-v")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k == "count" || k == "in-pack" {
			c, _ := strconv.Atoi(v)
			n += c
		}
	}
	return n
}

func syncForks(t *testing.T, st *mirror.Store, up *gittest.Upstreams, forks []string, net string) []repokey.Key {
	t.Helper()
	var keys []repokey.Key
	for _, f := range forks {
		url := up.RepoURL(f)
		key := keyOf(t, url)
		res, err := st.SyncIn(context.Background(), key, url, net)
		if err != nil {
			t.Fatalf("sync %s: %v", f, err)
		}
		want, _ := up.Refs(f)
		if !reflect.DeepEqual(res.After.Refs, want) {
			t.Fatalf("%s: refs %v, want %v", f, res.After.Refs, want)
		}
		keys = append(keys, key)
	}
	return keys
}

func TestForksShareOnePoolAndKeepNoneOfItsObjects(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 3)
	keys := syncForks(t, st, up, forks, "base")
	pool := st.PoolPath("base")
	fsck(t, pool)
	for _, k := range keys {
		if st.Network(k) != "base" {
			t.Fatalf("%s: network %q", k, st.Network(k))
		}
		fsck(t, st.Path(k))
		if n := localObjects(t, st.Path(k)); n != 0 {
			t.Fatalf("%s keeps %d objects of its own after sharing them with the pool", k, n)
		}
	}
	refs, err := gittest.Output("", "--git-dir="+pool, "for-each-ref", "--format=%(refname)", "refs/virtual/")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(strings.Fields(refs)); got != 3*3 {
		t.Fatalf("the pool holds %d member refs, want 9 (3 forks x 2 branches and a tag):\n%s", got, refs)
	}
}

func TestAFetchOfAMemberSharesItsNewObjectsAndMaintenanceCopiesNothingBack(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 2)
	keys := syncForks(t, st, up, forks, "base")
	tip, err := up.Commit(forks[0], "dev")
	if err != nil {
		t.Fatal(err)
	}
	syncForks(t, st, up, forks[:1], "base")
	if err := gittest.Git("", "--git-dir="+st.PoolPath("base"), "cat-file", "-e", tip); err != nil {
		t.Fatalf("the pool lacks the member's new commit: %v", err)
	}
	for run := range 2 { // a full run, then an incremental one
		if _, err := st.Maintain(context.Background(), keys[0], time.Hour); err != nil {
			t.Fatalf("maintenance run %d: %v", run, err)
		}
		if n := localObjects(t, st.Path(keys[0])); n != 0 {
			t.Fatalf("maintenance copied %d of the pool's objects back into the member", n)
		}
		fsck(t, st.Path(keys[0]))
	}
	sh, err := mirror.Probe(st.PoolPath("base"))
	if err != nil {
		t.Fatal(err)
	}
	if sh.Packs != 1 || !sh.Bitmap {
		t.Fatalf("the pool after its member's maintenance: %+v, want one pack with a bitmap", sh)
	}
}

func TestAStandaloneMirrorJoinsANetworkAndIsDeduplicated(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 2)
	keys := syncForks(t, st, up, forks, "")
	before := localObjects(t, st.Path(keys[1]))
	syncForks(t, st, up, forks, "base")
	for _, k := range keys {
		fsck(t, st.Path(k))
		if n := localObjects(t, st.Path(k)); n != 0 {
			t.Fatalf("%s keeps %d objects (had %d standalone) after joining", k, n, before)
		}
	}
}

func TestAMemberThatLeavesTakesItsObjectsAndTheOthersStayWhole(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 3)
	keys := syncForks(t, st, up, forks, "base")
	ctx := context.Background()
	own, err := gittest.Output("", "--git-dir="+st.Path(keys[0]), "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.LeaveNetwork(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(st.Path(keys[0]), "objects", "info", "alternates")); !os.IsNotExist(err) {
		t.Fatalf("the member that left still borrows from the pool: %v", err)
	}
	fsck(t, st.Path(keys[0]))
	if err := st.Verify(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(context.Background(), keys[1]); err != nil {
		t.Fatal(err)
	}
	fsck(t, st.Path(keys[2]))
	pool := st.PoolPath("base")
	fsck(t, pool)
	if err := gittest.Git("", "--git-dir="+pool, "cat-file", "-e", strings.TrimSpace(own)); err == nil {
		t.Fatal("the pool still holds the own commit of the member that left, after its repack")
	}
	if err := st.Retire(context.Background(), keys[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pool); !os.IsNotExist(err) {
		t.Fatalf("the pool of a network with no member left is still there: %v", err)
	}
}

func TestACorruptPoolIsFoundAndRepairedFromAMembersUpstream(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 2)
	keys := syncForks(t, st, up, forks, "base")
	ctx := context.Background()
	if _, err := st.Maintain(ctx, keys[0], 1); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(st.PoolPath("base"), "objects", "pack", "*.pack"))
	if len(packs) == 0 {
		t.Fatal("the pool has no pack")
	}
	for _, p := range packs {
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Verify(ctx, keys[0]); !errors.Is(err, mirror.ErrCorrupt) {
		t.Fatalf("verify of a member of a broken pool: %v, want ErrCorrupt", err)
	}
	if _, err := st.Replace(ctx, keys[0], up.RepoURL(forks[0])); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(ctx, keys[0]); err != nil {
		t.Fatalf("the repaired member: %v", err)
	}
	if got := st.Suspects(); !reflect.DeepEqual(got, keys) {
		t.Fatalf("suspects = %v, want every member of the broken pool %v", got, keys)
	}
	if _, err := st.Replace(ctx, keys[1], up.RepoURL(forks[1])); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		fsck(t, st.Path(k))
	}
}

func TestRootsAreCountedOnCloneAndOnlyForNewCommitsAfter(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("r", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	url := up.RepoURL("r")
	key := keyOf(t, url)
	ctx := context.Background()
	res, err := st.Sync(ctx, key, url)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := st.Roots(ctx, key, res)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := gittest.Output("", "--git-dir="+st.Path(key), "rev-list", "--max-parents=0", "--all")
	if !reflect.DeepEqual(roots, strings.Fields(want)) || len(roots) != 1 {
		t.Fatalf("roots = %v, want %v", roots, strings.Fields(want))
	}
	// An orphan branch brings a second root.
	wt := t.TempDir()
	for _, args := range [][]string{{"clone", "-q", filepath.Join(up.Dir, "r.git"), wt}, {"-C", wt, "checkout", "-q", "--orphan", "other"},
		{"-C", wt, "commit", "-q", "--allow-empty", "-m", "other root"}, {"-C", wt, "push", "-q", "origin", "other"}} {
		if err := gittest.Git("", args...); err != nil {
			t.Fatal(err)
		}
	}
	res, err = st.Sync(ctx, key, url)
	if err != nil {
		t.Fatal(err)
	}
	roots, err = st.Roots(ctx, key, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(roots) != 2 || roots[0] > roots[1] {
		t.Fatalf("roots after an orphan branch = %v, want two, smallest first", roots)
	}
	if err := gittest.Git("", "-C", wt, "push", "-q", "origin", ":other"); err != nil {
		t.Fatal(err)
	}
	res, err = st.Sync(ctx, key, url)
	if err != nil {
		t.Fatal(err)
	}
	if roots, err = st.Roots(ctx, key, res); err != nil || len(roots) != 1 {
		t.Fatalf("roots after the orphan branch was deleted = %v, %v: want one (a recount)", roots, err)
	}
}

func TestAPoolIsNamedSafelyWhateverTheNetworkIsCalled(t *testing.T) {
	t.Parallel()
	_, st := setup(t)
	pools := filepath.Join(filepath.Dir(st.Root()), "pools")
	seen := map[string]bool{}
	for _, name := range []string{"../../etc", "a/b", "A/B", "/abs", "", "x\x00y", strings.Repeat("n", 300), "net#2"} {
		p := st.PoolPath(name)
		if filepath.Dir(p) != pools {
			t.Fatalf("network %q: pool %s is not directly under %s", name, p, pools)
		}
		if base := filepath.Base(p); strings.HasPrefix(base, ".") || len(base) > 64 || seen[base] {
			t.Fatalf("network %q: pool name %q", name, base)
		}
		seen[filepath.Base(p)] = true
	}
}

// TestAPoolPacksWhatEveryMemberSharesFirst: after the pool's repack, every
// object of the history the members share lies before any object of one
// member's own, so that a clone of any member reuses the start of the
// pool's pack as it is (pack.islandCore), as a standalone mirror's clone
// reuses its whole pack.
func TestAPoolPacksWhatEveryMemberSharesFirst(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 3)
	syncForks(t, st, up, forks, "base")
	if err := st.MaintainPool(context.Background(), "base"); err != nil {
		t.Fatal(err)
	}
	baseRefs, err := up.Refs("base")
	if err != nil {
		t.Fatal(err)
	}
	shared := objectsOf(t, filepath.Join(up.Dir, "base.git"), baseRefs["refs/heads/main"])
	var own []string
	for _, f := range forks {
		own = append(own, objectsOf(t, filepath.Join(up.Dir, f+".git"), "refs/heads/main", "--not", baseRefs["refs/heads/main"])...)
	}
	if len(shared) == 0 || len(own) == 0 {
		t.Fatalf("%d shared objects, %d own ones: the network is not what the test needs", len(shared), len(own))
	}
	packs, err := filepath.Glob(filepath.Join(st.PoolPath("base"), "objects", "pack", "*.idx"))
	if err != nil || len(packs) != 1 {
		t.Fatalf("the pool's packs after its repack: %v, %v; want one", packs, err)
	}
	pos := packOrder(t, packs[0])
	lastShared, firstOwn := -1, len(pos)
	for _, o := range shared {
		p, ok := pos[o]
		if !ok {
			t.Fatalf("shared object %s is not in the pool's pack", o)
		}
		lastShared = max(lastShared, p)
	}
	for _, o := range own {
		p, ok := pos[o]
		if !ok {
			t.Fatalf("a member's own object %s is not in the pool's pack", o)
		}
		firstOwn = min(firstOwn, p)
	}
	if lastShared > firstOwn {
		t.Fatalf("the pool's pack holds a member's own object at %d, before a shared one at %d (of %d)", firstOwn, lastShared, len(pos))
	}
}

// objectsOf lists the objects rev-list --objects finds from revs in the
// repository at dir.
func objectsOf(t *testing.T, dir string, revs ...string) []string {
	t.Helper()
	out, err := gittest.Output("", append([]string{"--git-dir=" + dir, "rev-list", "--objects"}, revs...)...)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			ids = append(ids, f[0])
		}
	}
	return ids
}

// packOrder gives each object of the pack whose index is idx its place in
// the pack (0: first written).
func packOrder(t *testing.T, idx string) map[string]int {
	t.Helper()
	f, err := os.Open(idx)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("git", "show-index")
	cmd.Env = gittest.Env()
	cmd.Stdin = f
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("show-index %s: %v", idx, err)
	}
	type entry struct {
		off int64
		id  string
	}
	var ents []entry
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line) // offset, id, (crc)
		if len(f) < 2 {
			continue
		}
		off, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("show-index line %q: %v", line, err)
		}
		ents = append(ents, entry{off, f[1]})
	}
	slices.SortFunc(ents, func(a, b entry) int { return cmp.Compare(a.off, b.off) })
	pos := make(map[string]int, len(ents))
	for i, e := range ents {
		pos[e.id] = i
	}
	return pos
}

// The last two members of a network move to another at once (the network
// was renamed when it merged with another): both join the new one, and
// the old pool is removed once, whichever of them removes it.
func TestTheLastMembersLeavingAtOnceRemoveTheirPoolOnce(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 2)
	keys := syncForks(t, st, up, forks, "root-a")
	ctx := context.Background()
	errs := make(chan error, len(keys))
	for _, k := range keys {
		go func() { errs <- st.JoinNetwork(ctx, k, "merged") }()
	}
	for range keys {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		if got := st.Network(k); got != "merged" {
			t.Fatalf("%s is in network %q, want merged", k, got)
		}
		fsck(t, st.Path(k))
	}
	if _, err := os.Stat(st.PoolPath("root-a")); !os.IsNotExist(err) {
		t.Fatalf("the pool with no member left is still there: %v", err)
	}
}
