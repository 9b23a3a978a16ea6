package mirror_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// emptyRig is a pruneRig whose upstream can be emptied and restored.
type emptyRig struct {
	*pruneRig
	full map[string]string // the upstream's refs before it was emptied
}

func newEmptyRig(t *testing.T) *emptyRig {
	t.Helper()
	r := &emptyRig{pruneRig: newPruneRig(t, []string{"main", "dev"}, time.Minute, mirror.Limits{})}
	var err error
	if r.full, err = r.up.Refs("a"); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *emptyRig) empty() {
	r.t.Helper()
	for ref := range r.full {
		r.upstreamGit("update-ref", "-d", ref)
	}
}

func (r *emptyRig) restore() {
	r.t.Helper()
	for ref, oid := range r.full {
		r.upstreamGit("update-ref", ref, oid)
	}
}

func (r *emptyRig) served() map[string]string {
	r.t.Helper()
	refs, err := r.st.Refs(context.Background(), r.key)
	if err != nil {
		r.t.Fatal(err)
	}
	return refs.Refs
}

func (r *emptyRig) trySync() (mirror.Result, error) {
	return r.st.Sync(context.Background(), r.key, r.url)
}

func TestSyncAppliesAnEmptyAdvertisementOnlyWhenASecondCheckConfirmsIt(t *testing.T) {
	t.Parallel()
	r := newEmptyRig(t)
	r.empty()
	if _, err := r.trySync(); !errors.Is(err, mirror.ErrEmptyAdvertisement) {
		t.Fatalf("first empty advertisement: %v", err)
	}
	if !reflect.DeepEqual(r.served(), r.full) {
		t.Fatalf("refs vanished at once: %v", r.served())
	}
	// A source that comes back clears the suspicion: emptiness must be seen
	// from the first sighting to the confirmation.
	r.clk.Advance(mirror.DefaultEmptyConfirmAfter)
	r.restore()
	r.sync()
	r.empty()
	if _, err := r.trySync(); !errors.Is(err, mirror.ErrEmptyAdvertisement) {
		t.Fatalf("empty again after a full advertisement: %v", err)
	}
	r.clk.Advance(mirror.DefaultEmptyConfirmAfter)
	res, err := r.trySync()
	if err != nil {
		t.Fatalf("confirmed empty advertisement: %v", err)
	}
	if len(r.served()) != 0 || !res.Changed {
		t.Fatalf("confirmed emptiness not applied: %+v, %v", res, r.served())
	}
}

// The live finding: an on-demand check 2 s after the first empty
// advertisement deleted every ref and pruned the objects.
func TestSyncDoesNotDeleteOnAnEmptyAdvertisementConfirmedTooSoon(t *testing.T) {
	t.Parallel()
	r := newEmptyRig(t)
	r.st.SetEmptyConfirmAfter(90 * time.Minute)
	r.empty()
	for _, step := range []time.Duration{0, 2 * time.Second, time.Hour, 30*time.Minute - 3*time.Second} {
		r.clk.Advance(step)
		if _, err := r.trySync(); !errors.Is(err, mirror.ErrEmptyAdvertisement) {
			t.Fatalf("a check %v later: %v, want the emptiness still refused", step, err)
		}
		if !reflect.DeepEqual(r.served(), r.full) {
			t.Fatalf("a check %v later deleted refs: %v", step, r.served())
		}
	}
	r.clk.Advance(time.Second) // 90 minutes after the first
	if _, err := r.trySync(); err != nil {
		t.Fatalf("a check past the bound: %v", err)
	}
	if len(r.served()) != 0 {
		t.Fatalf("a check past the bound kept refs: %v", r.served())
	}
}

func TestConfirmedDeletionKeepsTheOldTipsHiddenForTheTombstonePeriod(t *testing.T) {
	t.Parallel()
	r := newEmptyRig(t)
	r.st.SetTombstonePeriod(7 * 24 * time.Hour)
	ctx := context.Background()
	r.empty()
	if _, err := r.trySync(); !errors.Is(err, mirror.ErrEmptyAdvertisement) {
		t.Fatal(err)
	}
	r.clk.Advance(mirror.DefaultEmptyConfirmAfter)
	res, err := r.trySync()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != len(r.full) {
		t.Fatalf("dropped %v, want every ref of %v", res.Dropped, r.full)
	}
	for _, d := range res.Dropped {
		if d.Old != r.full[d.Ref] || d.New != "" {
			t.Fatalf("dropped %+v, want old %s and no new", d, r.full[d.Ref])
		}
	}
	// The pruner runs past its bound: the tips are kept.
	r.clk.Advance(time.Hour)
	if n := r.st.PruneDue(ctx); n == 0 {
		t.Fatal("the deletion was not pruned")
	}
	for ref, oid := range r.full {
		if !r.has(oid) {
			t.Fatalf("%s's tip %s is gone after the prune, inside the tombstone period", ref, oid)
		}
	}
	hidden, err := gittest.Output("", "--git-dir="+r.st.Path(r.key), "for-each-ref", "--format=%(objectname) %(refname)", mirror.TombstoneRefs)
	if err != nil {
		t.Fatal(err)
	}
	for ref, oid := range r.full {
		if !strings.Contains(hidden, oid+" "+mirror.TombstoneRefs) || !strings.Contains(hidden, "/"+ref+"\n") {
			t.Fatalf("no tombstone of %s at %s in\n%s", ref, oid, hidden)
		}
	}

	// The public edge neither advertises the tombstones nor serves their
	// objects by ID.
	edge, err := gittest.Start(filepath.Dir(r.st.Path(r.key)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(edge.Close)
	name := strings.TrimSuffix(filepath.Base(r.st.Path(r.key)), ".git")
	out, err := exec.Command("git", "ls-remote", edge.RepoURL(name)).CombinedOutput()
	if err != nil {
		t.Fatalf("ls-remote of the mirror: %v: %s", err, out)
	}
	if strings.Contains(string(out), "refs/gitfleet") {
		t.Fatalf("the edge advertises hidden refs:\n%s", out)
	}
	clone := t.TempDir()
	if err := gittest.Git(clone, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2"} {
		out, err := exec.Command("git", "-C", clone, "-c", "protocol.version="+v, "fetch", "-q", edge.RepoURL(name), r.full["refs/heads/main"]).CombinedOutput()
		if err == nil {
			t.Fatalf("protocol v%s: the edge served a tombstone's tip by its ID: %s", v, out)
		}
	}

	// A restart finds the tombstones; once their period is over the
	// pruner drops them and their objects.
	r.open(time.Minute, mirror.Limits{})
	r.st.SetTombstonePeriod(7 * 24 * time.Hour)
	r.clk.Advance(7*24*time.Hour - 2*time.Hour)
	r.st.PruneDue(ctx)
	if !r.has(r.full["refs/heads/main"]) {
		t.Fatal("a tip went before its tombstone period ended")
	}
	r.clk.Advance(time.Hour)
	if n := r.st.PruneDue(ctx); n != 1 {
		t.Fatalf("pruned %d mirrors at the end of the tombstone period, want 1", n)
	}
	for ref, oid := range r.full {
		if r.has(oid) {
			t.Fatalf("%s's tip %s is still stored after the tombstone period", ref, oid)
		}
	}
	r.whole()
}

func TestSyncNamesTheOldAndNewTipsOfAForcePush(t *testing.T) {
	t.Parallel()
	r := newEmptyRig(t)
	old := r.full["refs/heads/main"]
	ff, err := r.up.Commit("a", "dev")
	if err != nil {
		t.Fatal(err)
	}
	out, err := gittest.Output("", "--git-dir="+r.bare(), "commit-tree", "-m", "rewritten", old+"^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	rewritten := strings.TrimSpace(out)
	r.upstreamGit("update-ref", "refs/heads/main", rewritten) // a force-push
	r.upstreamGit("update-ref", "-d", "refs/tags/v1")
	res := r.sync()
	want := []mirror.RefChange{
		{Ref: "refs/heads/main", Old: old, New: rewritten},
		{Ref: "refs/tags/v1", Old: r.full["refs/tags/v1"]},
	}
	if !reflect.DeepEqual(res.Dropped, want) {
		t.Fatalf("dropped %+v, want %+v (dev's fast-forward to %s is not one)", res.Dropped, want, ff)
	}
}
