package gitcmd

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitIn runs git in the bare repository dir.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// The refs read from the files are the refs git reads, in every shape a
// mirror's refs take: packed, loose, loose over packed, annotated tags,
// nested names, deletions, a detached HEAD; and a shape it does not read
// (a symbolic ref among the branches) is left to git.
func TestStoredRefsReadsWhatGitReads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r := New(Direct(), Options{})
	ctx := context.Background()
	check := func(what string, wantFiles bool) {
		t.Helper()
		want, err := r.LocalRefs(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.StoredRefs(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Refs, want.Refs) || got.Head != want.Head {
			t.Fatalf("%s: read %v (HEAD %q), git reads %v (HEAD %q)", what, got.Refs, got.Head, want.Refs, want.Head)
		}
		_, ferr := readRefFiles(dir)
		if (ferr == nil) != wantFiles {
			t.Fatalf("%s: read from the files: %v, want %v", what, ferr, wantFiles)
		}
	}
	check("an empty repository", true)

	tree := gitIn(t, dir, "hash-object", "-w", "-t", "tree", "/dev/null")
	c1 := gitIn(t, dir, "commit-tree", "-m", "one", tree)
	c2 := gitIn(t, dir, "commit-tree", "-m", "two", "-p", c1, tree)
	gitIn(t, dir, "update-ref", "refs/heads/main", c1)
	gitIn(t, dir, "update-ref", "refs/heads/feature/deep/name", c1)
	gitIn(t, dir, "tag", "-a", "-m", "annotated", "v1", c1)
	gitIn(t, dir, "tag", "light", c1)
	gitIn(t, dir, "update-ref", "refs/pull/1/head", c2) // not mirrored
	gitIn(t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
	check("loose refs", true)

	gitIn(t, dir, "pack-refs", "--all")
	check("packed refs with peeled tags", true)

	gitIn(t, dir, "update-ref", "refs/heads/main", c2) // loose over packed
	gitIn(t, dir, "update-ref", "-d", "refs/heads/feature/deep/name")
	gitIn(t, dir, "update-ref", "refs/tags/v2", c2)
	check("loose over packed, a deletion", true)

	if err := os.WriteFile(filepath.Join(dir, "refs", "heads", "half.lock"), []byte(c2+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("a ref being written", true)

	gitIn(t, dir, "update-ref", "--no-deref", "HEAD", c1)
	check("a detached HEAD", true)

	gitIn(t, dir, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
	check("a symbolic ref among the branches", false)
}

// The packed-refs file PackedRefs writes is read by git as the refs it was
// given, peeled by `git pack-refs --all` as git's own; and names git would
// not store side by side, or an ID that is not one, are refused.
func TestPackedRefsAreTheRefsGitReads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	tree := gitIn(t, dir, "hash-object", "-w", "-t", "tree", "/dev/null")
	c1 := gitIn(t, dir, "commit-tree", "-m", "one", tree)
	c2 := gitIn(t, dir, "commit-tree", "-m", "two", "-p", c1, tree)
	gitIn(t, dir, "tag", "-a", "-m", "annotated", "v2", c1)
	tag := gitIn(t, dir, "rev-parse", "refs/tags/v2")
	gitIn(t, dir, "update-ref", "-d", "refs/tags/v2")
	refs := map[string]string{
		"refs/heads/main": c2, "refs/heads/main-2": c1, "refs/heads/feature/deep/name": c1,
		"refs/tags/v1": c1, "refs/tags/v2": tag, "refs/heads/Main": c1,
	}
	b, err := PackedRefs(refs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "packed-refs"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(Direct(), Options{})
	got, err := r.LocalRefs(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.Refs, refs) {
		t.Fatalf("git reads %v from PackedRefs(%v)", got.Refs, refs)
	}
	gitIn(t, dir, "pack-refs", "--all")
	if packed, _ := os.ReadFile(filepath.Join(dir, "packed-refs")); !strings.Contains(string(packed), "fully-peeled") ||
		!strings.Contains(string(packed), tag+" refs/tags/v2\n^"+c1+"\n") {
		t.Fatalf("after git pack-refs --all, packed-refs is\n%s\nwant the tag v2 peeled to %s", packed, c1)
	}

	for _, bad := range []map[string]string{
		{"refs/heads/a": c1, "refs/heads/a/b": c2},
		{"refs/tags/v1": c1, "refs/tags/v1/x/y": c1},
		{"refs/heads/main": "not an id"},
	} {
		if _, err := PackedRefs(bad); err == nil {
			t.Errorf("PackedRefs(%v) = nil error; want it refused", bad)
		}
	}
}
