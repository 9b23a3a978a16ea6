package gittest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Create's upstream as a client sees it: HEAD the first branch, every
// branch one commit on top of the first's, annotated tags on the first,
// a root of its own; and Commit moves any of its branches.
func TestCreateMakesBranchesTagsAndAWorkTreeForCommit(t *testing.T) {
	u, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.Close)
	if err := u.Create("team/a", []string{"main", "dev", "release"}, []string{"v1.0", "v1.1"}); err != nil {
		t.Fatal(err)
	}
	if err := u.Create("team/b", []string{"trunk"}, nil); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(u.Dir, "team/a.git")
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := Output("", append([]string{"--git-dir=" + dir}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}

	refs, err := u.Refs("team/a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for r := range refs {
		names = append(names, r)
	}
	slices.Sort(names)
	if want := []string{"refs/heads/dev", "refs/heads/main", "refs/heads/release", "refs/tags/v1.0", "refs/tags/v1.1"}; !slices.Equal(names, want) {
		t.Fatalf("refs %v, want %v", names, want)
	}
	if head := git(bare, "symbolic-ref", "HEAD"); head != "refs/heads/main" {
		t.Errorf("HEAD is %s, want refs/heads/main", head)
	}
	main := refs["refs/heads/main"]
	for _, b := range []string{"dev", "release"} {
		if parent := git(bare, "rev-parse", "refs/heads/"+b+"^"); parent != main {
			t.Errorf("%s's parent is %s, want main's commit %s", b, parent, main)
		}
	}
	for _, tag := range []string{"v1.0", "v1.1"} {
		if typ := git(bare, "cat-file", "-t", "refs/tags/"+tag); typ != "tag" {
			t.Errorf("%s is a %s, want an annotated tag", tag, typ)
		}
		if target := git(bare, "rev-parse", "refs/tags/"+tag+"^{commit}"); target != main {
			t.Errorf("%s tags %s, want main's commit %s", tag, target, main)
		}
	}
	if a, b := git(bare, "rev-list", "--max-parents=0", "main"), git(filepath.Join(u.Dir, "team/b.git"), "rev-list", "--max-parents=0", "trunk"); a == b {
		t.Errorf("two upstreams share the root %s: they would be one fork network", a)
	}
	if out, err := Output("", "--git-dir="+bare, "fsck", "--strict"); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}

	commit, err := u.Commit("team/a", "dev")
	if err != nil {
		t.Fatal(err)
	}
	if got := git(bare, "rev-parse", "refs/heads/dev"); got != commit {
		t.Errorf("after Commit dev is %s, want %s", got, commit)
	}
	if parent := git(bare, "rev-parse", "refs/heads/dev^^"); parent != main {
		t.Errorf("the new commit is not on top of dev: its grandparent is %s, want %s", parent, main)
	}
}

// BenchmarkCreate makes upstreams as the end-to-end fleets do (three
// branches, two tags), one an iteration.
func BenchmarkCreate(b *testing.B) {
	u, err := Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(u.Close)
	for i := 0; b.Loop(); i++ {
		if err := u.Create(fmt.Sprintf("team/project-%d", i), []string{"main", "dev", "release"}, []string{"v1.0", "v1.1"}); err != nil {
			b.Fatal(err)
		}
	}
}
