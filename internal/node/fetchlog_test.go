package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestRefChangesCountsEveryChangeAndNamesTheFirstOnes(t *testing.T) {
	before := gitcmd.Refs{Refs: map[string]string{"refs/heads/main": "a", "refs/heads/gone": "b", "refs/tags/v1": "c"}}
	after := gitcmd.Refs{Refs: map[string]string{"refs/heads/main": "d", "refs/heads/new": "e", "refs/tags/v1": "c"}}
	n, names, moves := refChanges(before, after)
	if n != 3 || !slices.Equal(names, []string{"refs/heads/gone", "refs/heads/main", "refs/heads/new"}) {
		t.Errorf("%d changes %q", n, names)
	}
	wantMoves := []fetchlog.Move{{Ref: "refs/heads/gone", Old: "b"}, {Ref: "refs/heads/main", Old: "a", New: "d"}, {Ref: "refs/heads/new", New: "e"}}
	if !slices.Equal(moves, wantMoves) {
		t.Errorf("moves %+v, want %+v", moves, wantMoves)
	}
	many := gitcmd.Refs{Refs: map[string]string{}}
	for i := range 30 {
		many.Refs[fmt.Sprintf("refs/tags/t%02d", i)] = "x"
	}
	n, names, moves = refChanges(gitcmd.Refs{}, many)
	if n != 30 || len(names) != fetchlog.MaxRefNames || names[0] != "refs/tags/t00" || len(moves) != fetchlog.MaxRefNames {
		t.Errorf("a clone of 30 refs: %d changes, names %q", n, names)
	}
}

// A force-push upstream: the sync's fetch log entry names the branch with
// its old and new IDs, so that the rewrite can be undone by hand.
func TestTheFetchLogNamesTheOldAndNewIDsOfAForcePush(t *testing.T) {
	r := newCrashRig(t) // a mirror of a real upstream
	n, key, up := r.start(), r.key, r.up
	n.clk = clock.NewFake(time.Unix(1_800_000_000, 0))
	refs, err := up.Refs("c")
	if err != nil {
		t.Fatal(err)
	}
	old := refs["refs/heads/main"]
	out, err := gittest.Output("", "--git-dir", up.Dir+"/c.git", "commit-tree", "-m", "rewritten", old+"^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	rewritten := strings.TrimSpace(out)
	if err := gittest.Git("", "--git-dir", up.Dir+"/c.git", "update-ref", "refs/heads/main", rewritten); err != nil {
		t.Fatal(err)
	}
	res, err := n.mirror.Sync(context.Background(), repokey.Key(key), up.RepoURL("c"))
	if err != nil {
		t.Fatal(err)
	}
	e := n.WorkEntry(key, "check", n.clk.Now(), res, nil)
	want := []fetchlog.Rewrite{{Ref: "refs/heads/main", Old: old, New: rewritten}}
	if !slices.Equal(e.Rewrites, want) || e.Kind != "fetch" {
		t.Fatalf("entry %+v, want a fetch with rewrites %+v", e, want)
	}
}
