package gitcmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseVersionReadsEveryVendorsSpelling(t *testing.T) {
	for in, want := range map[string]Version{
		"git version 2.39.5\n":                  {2, 39, 5},
		"git version 2.43.0.windows.1":          {2, 43, 0},
		"git version 2.39.3 (Apple Git-146)":    {2, 39, 3},
		"git version 2.45.rc0":                  {2, 45, 0},
		"git version 3.0.0-1ubuntu1~ppa1 extra": {3, 0, 0},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "hg version 2.39", "git version x.y"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
	if !(Version{2, 43, 0}).AtLeast(2, 43) || (Version{2, 39, 5}).AtLeast(2, 43) || !(Version{3, 0, 0}).AtLeast(2, 43) {
		t.Error("AtLeast")
	}
}

func TestTheInstalledGitSaysItsVersion(t *testing.T) {
	v, err := New(Direct(), Options{}).Version(context.Background())
	if err != nil || v.Major < 2 {
		t.Fatalf("Version() = %v, %v", v, err)
	}
}

func TestRefNamesThatCannotBeStoredAreNamed(t *testing.T) {
	lim := RefLimits{MaxRefLength: 1024}
	for name, bad := range map[string]bool{
		"refs/heads/main":                                 false,
		"refs/heads/" + strings.Repeat("a", 250):          false,
		"refs/heads/" + strings.Repeat("a", 251):          true, // no file system stores the lock file
		"refs/heads/" + strings.Repeat("a/", 600):         true, // over 1024 bytes
		"refs/heads/" + strings.Repeat("abcd/", 200):      false,
		"refs/heads/a\x01b":                               true,
		"refs/tags/del\x7f":                               true,
		"refs/heads/" + strings.Repeat("x", 4000)[:4000]:  true,
		"refs/heads/ünïcödé":                              false,
		"refs/heads/" + strings.Repeat("b", 100) + "/end": false,
	} {
		if why := CheckRefName(name, lim); (why != "") != bad {
			t.Errorf("CheckRefName(%.40q...) = %q, want refused=%v", name, why, bad)
		}
	}
	if rs, ok := NegativeRefspec("refs/heads/ok"); !ok || rs != "^refs/heads/ok" {
		t.Errorf("NegativeRefspec = %q, %v", rs, ok)
	}
	if _, ok := NegativeRefspec("refs/heads/a*b"); ok {
		t.Error("a name with * became a refspec")
	}
}

// upstream makes a bare repository with one commit on main and the extra
// ref names given, written straight into packed-refs as a hostile server
// would keep them.
func upstream(t *testing.T, extra []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "up.git")
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "--bare", dir)
	tree := run("--git-dir="+dir, "hash-object", "-w", "-t", "tree", "/dev/null")
	commit := run("--git-dir="+dir, "commit-tree", "-m", "c", tree)
	var b bytes.Buffer
	b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	names := append([]string{"refs/heads/main"}, extra...)
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", commit, n)
	}
	if err := os.WriteFile(filepath.Join(dir, "packed-refs"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	run("--git-dir="+dir, "pack-refs", "--all") // sorts them
	return dir
}

func TestListRefsStopsAtMaxRefs(t *testing.T) {
	var extra []string
	for i := 0; i < 300; i++ {
		extra = append(extra, fmt.Sprintf("refs/heads/b%03d", i))
	}
	extra = append(extra, "refs/pull/1/head", "refs/pull/2/head")
	dir := upstream(t, extra)
	r := New(LocalOnly(), Options{})
	ctx := context.Background()
	l, err := r.ListRefs(ctx, "file://"+dir, RefLimits{MaxRefs: 301})
	if err != nil || len(l.Refs.Refs) != 301 {
		t.Fatalf("under the limit: %d refs, %v", len(l.Refs.Refs), err)
	}
	if _, ok := l.Refs.Refs["refs/pull/1/head"]; ok {
		t.Fatal("a pull request ref was listed")
	}
	_, err = r.ListRefs(ctx, "file://"+dir, RefLimits{MaxRefs: 300})
	if ClassOf(err) != ClassTooManyRefs {
		t.Fatalf("over the limit: err = %v, want class %s", err, ClassTooManyRefs)
	}
}

func TestListRefsSkipsNamesTooLongAndKeepsTheRest(t *testing.T) {
	long := "refs/heads/" + strings.Repeat("x", 4000)
	dir := upstream(t, []string{long, "refs/tags/v1"})
	l, err := New(LocalOnly(), Options{}).ListRefs(context.Background(), "file://"+dir, RefLimits{MaxRefLength: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Refs.Refs) != 2 || len(l.Skipped) != 1 || l.Skipped[0] != long {
		t.Fatalf("kept %v, skipped %d", l.Refs.Refs, len(l.Skipped))
	}
}

func TestListRefsOnACaseInsensitiveFileSystemKeepsOneOfTwoSpellings(t *testing.T) {
	dir := upstream(t, []string{"refs/heads/Master", "refs/tags/V1", "refs/tags/v1"})
	r := New(LocalOnly(), Options{})
	l, err := r.ListRefs(context.Background(), "file://"+dir, RefLimits{CaseInsensitiveFS: true})
	if err != nil {
		t.Fatal(err)
	}
	// The upstream has main, Master, V1 and v1 (upstream adds main).
	if len(l.Skipped) != 1 || len(l.Refs.Refs)+len(l.Skipped) != 4 {
		t.Fatalf("kept %v, skipped %v", l.Refs.Refs, l.Skipped)
	}
	if l, err := r.ListRefs(context.Background(), "file://"+dir, RefLimits{}); err != nil || len(l.Skipped) != 0 {
		t.Fatalf("a case-sensitive file system keeps both: %v skipped, %v", l.Skipped, err)
	}
}

// The memory limit bounds what git allocates but not its read-only maps of
// packs: a pack larger than the limit is still read, a blob larger than the
// limit is not.
func TestMemoryLimitBoundsAllocationsNotPackMaps(t *testing.T) {
	if !MemoryLimitSupported {
		t.Skip("no memory limit on this system")
	}
	dir := upstream(t, nil)
	blob := func(size int) string {
		f := filepath.Join(t.TempDir(), "blob")
		data := make([]byte, size)
		_, _ = rand.Read(data)
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("git", "--git-dir="+dir, "hash-object", "-w", f).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	small, big := blob(1<<20), blob(40<<20)
	mk := exec.Command("git", "--git-dir="+dir, "mktree")
	mk.Stdin = strings.NewReader("100644 blob " + big + "\tbig\n")
	treeOut, err := mk.Output()
	if err != nil {
		t.Fatal(err)
	}
	tree := strings.TrimSpace(string(treeOut))
	const empty = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	// diff-tree -p reads both sides of a blob into memory (cat-file
	// would stream it).
	diff := Cmd{GitDir: dir, Name: "diff-tree", Flags: []string{"-p"}, Args: []string{empty, tree}}
	if out, err := exec.Command("git", "--git-dir="+dir, "repack", "-adq").CombinedOutput(); err != nil {
		t.Fatalf("repack: %v %s", err, out)
	}
	ctx := context.Background()
	const limit = 24 << 20 // less than the pack (41 MiB), more than git needs
	r := New(Direct(), Options{MemoryLimit: limit})
	out, err := r.Output(ctx, Cmd{GitDir: dir, Name: "cat-file", Flags: []string{"-p"}, Args: []string{small}})
	if err != nil || len(out) != 1<<20 {
		t.Fatalf("a 1 MiB blob from a 41 MiB pack under a 24 MiB limit: %d bytes, %v", len(out), err)
	}
	if _, err := r.Output(ctx, diff); ClassOf(err) != ClassTooLarge {
		t.Fatalf("a 40 MiB blob read into memory under a 24 MiB limit: %v, want class %s", err, ClassTooLarge)
	}
	if _, err := New(Direct(), Options{}).Output(ctx, diff); err != nil {
		t.Fatalf("without a limit: %v", err)
	}
	// The supervised (upstream-facing) commands get the limit too.
	if _, err := New(LocalOnly(), Options{MemoryLimit: limit}).ListRefs(ctx, "file://"+dir, RefLimits{}); err != nil {
		t.Fatalf("ls-remote under the limit: %v", err)
	}
}
