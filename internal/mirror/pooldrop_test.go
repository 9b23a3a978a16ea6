package mirror_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A new member's clone may take as had an object of the pool that no
// member reaches any more (a member left, the pool's drop is due): its
// ref then points at an object only the pool holds. A drop that runs
// while that clone is under way must count the new member, or the
// member is left broken. Here the drop starts when the clone is in place
// and not yet shared with the pool, the worst moment.
func TestAPoolDropDuringANewMembersCloneKeepsWhatTheCloneTookFromThePool(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	forks := network(t, up, 2)
	keys := syncForks(t, st, up, forks, "base")
	ctx := context.Background()
	// fork2 is a copy of fork1: its main is fork1's own commit.
	if err := up.Fork(forks[1], "fork2"); err != nil {
		t.Fatal(err)
	}
	own, err := gittest.Output("", "--git-dir="+st.Path(keys[1]), "rev-parse", "refs/heads/main")
	if err != nil {
		t.Fatal(err)
	}
	own = strings.TrimSpace(own)
	// fork1 leaves; until the drop, the pool still holds its own commit,
	// which no member's refs reach.
	if _, err := mirror.LeaveWithoutDrop(st, keys[1]); err != nil {
		t.Fatal(err)
	}
	dropped := make(chan error, 1)
	mirror.SetHookPlaced(st, func(repokey.Key) {
		go func() { dropped <- st.MaintainPool(ctx, "base") }()
		// A drop that does not wait for the new member ends at once; one
		// that does waits for this clone's lock. Either way the clone goes
		// on after this (the bound only lets a wrong drop finish first).
		select {
		case err := <-dropped:
			dropped <- err
		case <-time.After(3 * time.Second):
		}
	})
	url := up.RepoURL("fork2")
	key := keyOf(t, url)
	if _, err := st.SyncIn(ctx, key, url, "base"); err != nil {
		t.Fatal(err)
	}
	mirror.SetHookPlaced(st, nil)
	if err := <-dropped; err != nil {
		t.Fatal(err)
	}
	fsck(t, st.Path(key))
	if err := gittest.Git("", "--git-dir="+st.Path(key), "cat-file", "-e", own+"^{commit}"); err != nil {
		t.Fatalf("the new member lost the commit its clone took from the pool: %v", err)
	}
	fsck(t, st.Path(keys[0]))
	fsck(t, st.Path(keys[1]))
}
