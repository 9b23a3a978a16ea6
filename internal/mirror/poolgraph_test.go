package mirror_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// git fsck checks every commit a commit graph names against the objects
// the repository reaches, its pool's included, and so does any git that
// looks such a commit up. A pool's drop lets go of what no member's refs
// reach; these tests read a member across a drop.

// A standalone mirror joins a network with the commit graph its clone
// wrote, which names every commit it reached; its upstream then moves a
// branch back. The commit the branch pointed at is reached by no member
// any more, and the pool lets it go at its next drop: no commit graph the
// member reads may still name it.
func TestAMemberStaysWholeWhenItsPoolDropsACommitItReachedOnce(t *testing.T) {
	up, st := setup(t)
	forks := network(t, up, 2)
	refs, err := up.Refs(forks[0])
	if err != nil {
		t.Fatal(err)
	}
	gone, err := up.Commit(forks[0], "dev")
	if err != nil {
		t.Fatal(err)
	}
	keys := append(syncForks(t, st, up, forks[:1], ""), syncForks(t, st, up, forks[1:], "base")...)
	ctx := context.Background()
	if sh, err := st.Probe(keys[0]); err != nil || !sh.CommitGraph {
		t.Fatalf("a standalone clone has no commit graph: %+v, %v", sh, err)
	}
	if err := st.JoinNetwork(ctx, keys[0], "base"); err != nil {
		t.Fatal(err)
	}
	upstream := filepath.Join(up.Dir, forks[0]+".git")
	if err := gittest.Git("", "--git-dir="+upstream, "update-ref", "refs/heads/dev", refs["refs/heads/dev"]); err != nil {
		t.Fatal(err)
	}
	syncForks(t, st, up, forks[:1], "base")
	if err := st.LeaveNetwork(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	pool := st.PoolPath("base")
	if hasObject(pool, gone) || hasObject(st.Path(keys[0]), gone) {
		t.Fatalf("the commit %s that no member reaches is still held after the drop", gone)
	}
	fsck(t, st.Path(keys[0]))
	fsck(t, pool)
	// And after its maintenance, which gives a standalone mirror its graph.
	if _, err := st.Maintain(ctx, keys[0], time.Hour); err != nil {
		t.Fatal(err)
	}
	fsck(t, st.Path(keys[0]))
}

// A member is read (served, checked) while its pool is repacked without
// what a member that left alone reached: at every step of the drop, what
// the pool's commit graph names is there.
func TestAMemberIsWholeWhileItsPoolDropsWhatALeaverAloneReached(t *testing.T) {
	up, st := setup(t)
	forks := network(t, up, 2)
	keys := syncForks(t, st, up, forks, "base")
	ctx := context.Background()
	own, err := gittest.Output("", "--git-dir="+st.Path(keys[1]), "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MaintainPool(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	pool := st.PoolPath("base")
	if sh, err := mirror.Probe(pool); err != nil || !sh.CommitGraph {
		t.Fatalf("the pool has no commit graph after its maintenance: %+v, %v", sh, err)
	}
	ran := false
	mirror.SetHookDropped(st, func(string) {
		ran = true
		if hasObject(pool, strings.TrimSpace(own)) {
			t.Errorf("the pool's repack kept the own commit of the member that left")
		}
		if err := gittest.Git("", "--git-dir="+st.Path(keys[0]), "fsck", "--no-progress", "--connectivity-only"); err != nil {
			t.Errorf("a member read while its pool dropped objects is not whole: %v", err)
		}
	})
	if err := st.LeaveNetwork(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the member's leave dropped nothing from the pool")
	}
	fsck(t, st.Path(keys[0]))
}

// A drop stopped midway (a shutdown cancels its context) leaves the pool
// guarded against any git that would prune it, and owed its drop.
func TestAPoolDropStoppedMidwayLeavesThePoolGuarded(t *testing.T) {
	up, st := setup(t)
	forks := network(t, up, 3)
	keys := syncForks(t, st, up, forks, "base")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mirror.SetHookDropped(st, func(string) { cancel() })
	_ = st.LeaveNetwork(ctx, keys[2]) // stopped or finished: either way the pool stays guarded
	mirror.SetHookDropped(st, nil)
	pool := st.PoolPath("base")
	out, err := gittest.Output("", "--git-dir="+pool, "config", "extensions.preciousObjects")
	if err != nil || strings.TrimSpace(out) != "true" {
		t.Fatalf("after a drop stopped midway the pool's extensions.preciousObjects is %q (%v), want true", strings.TrimSpace(out), err)
	}
	if err := st.MaintainPool(context.Background(), "base"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pool, "gitfleet-drop-due")); !os.IsNotExist(err) {
		t.Fatalf("the pool still owes a drop after its maintenance: %v", err)
	}
	for _, k := range keys[:2] {
		fsck(t, st.Path(k))
	}
}

// A leave stopped once the member's link is cut (a shutdown) puts the link
// back and says it was stopped: the member is not called corrupt (which
// would have it repaired, cloned anew) and stays a whole member.
func TestALeaveStoppedMidwayIsNoCorruption(t *testing.T) {
	up, st := setup(t)
	forks := network(t, up, 2)
	keys := syncForks(t, st, up, forks, "base")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mirror.SetHookCut(st, func(repokey.Key) { cancel() })
	err := st.LeaveNetwork(ctx, keys[0])
	if err == nil {
		t.Fatal("a leave stopped midway reported no error")
	}
	if errors.Is(err, mirror.ErrCorrupt) {
		t.Fatalf("a leave stopped midway called the member corrupt: %v", err)
	}
	if got := st.Network(keys[0]); got != "base" {
		t.Fatalf("after a leave stopped midway the mirror is in network %q, want base", got)
	}
	fsck(t, st.Path(keys[0]))
}
