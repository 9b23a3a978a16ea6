package mirror_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// boundedRig is a pull rig whose upstream is asked through
// Store.ListUpstream, as the full node asks it, under maxRefs.
func boundedRig(t *testing.T, maxRefs int) *pullRig {
	t.Helper()
	r := newPullRig(t)
	r.st.SetLimits(mirror.Limits{MaxRefs: maxRefs})
	r.upstream = func(ctx context.Context, names []string) (gitcmd.Refs, error) {
		r.asked++
		r.lastAsk = names
		return r.st.ListUpstream(ctx, r.key, r.up.RepoURL("a"), names)
	}
	return r
}

func refNames(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

// A first pull asks the upstream for every branch and tag: an upstream
// that advertises more than --max-refs is refused as too-many-refs (git
// is stopped past the bound), and nothing of the pull is kept.
func TestFirstVerifiedPullOfAnUpstreamWithMoreBranchesThanMaxRefsIsRefused(t *testing.T) {
	t.Parallel()
	r := boundedRig(t, 50)
	if err := r.up.AddRefs("a", "main", refNames("refs/heads/b%03d", 60)); err != nil {
		t.Fatal(err)
	}
	_, err := r.pull()
	if gitcmd.ClassOf(err) != gitcmd.ClassTooManyRefs {
		t.Fatalf("want too-many-refs, got %v", err)
	}
	if r.lastAsk != nil {
		t.Fatalf("a first pull asks for every branch and tag, asked %v", r.lastAsk)
	}
	if r.st.Has(r.key) {
		t.Fatal("a refused first pull created the mirror")
	}
	r.noQuarantineLeft()
}

// Refs other than branches and tags (a host's pull request refs) do not
// count towards --max-refs and are not asked for; HEAD, which a first
// pull needs, is still asked.
func TestFirstVerifiedPullCountsOnlyBranchesAndTagsAndKeepsHead(t *testing.T) {
	t.Parallel()
	r := boundedRig(t, 50)
	if err := r.up.AddRefs("a", "main", refNames("refs/pull/%d/head", 200)); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir="+filepath.Join(r.up.Dir, "a.git"), "symbolic-ref", "HEAD", "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	res, err := r.pull()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cloned || res.After.Head != "refs/heads/dev" {
		t.Fatalf("first pull: %+v, want a clone with HEAD at refs/heads/dev", res)
	}
	if !reflect.DeepEqual(r.served(), r.upRefs()) {
		t.Fatalf("served %v, upstream %v", r.served(), r.upRefs())
	}
	r.noQuarantineLeft()
}

// A pull that changes more refs than are asked by name lists every branch
// and tag as a first pull does, under the same bound.
func TestVerifiedPullOfManyChangesIsBoundedByMaxRefs(t *testing.T) {
	t.Parallel()
	r := boundedRig(t, 50)
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	before := r.served()
	if err := r.up.AddRefs("a", "main", refNames("refs/heads/b%03d", 70)); err != nil {
		t.Fatal(err)
	}
	r.follow()
	_, err := r.pull()
	if gitcmd.ClassOf(err) != gitcmd.ClassTooManyRefs {
		t.Fatalf("want too-many-refs, got %v", err)
	}
	if r.lastAsk != nil {
		t.Fatalf("70 changes asked by name: %d names", len(r.lastAsk))
	}
	if !reflect.DeepEqual(r.served(), before) {
		t.Fatalf("served refs moved: %v, want %v", r.served(), before)
	}
	r.noQuarantineLeft()
}
