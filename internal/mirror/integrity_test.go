package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// craft makes a bare upstream repository name whose main branch is one
// commit written byte for byte (git hash-object --literally), on a tree
// with one file named entry. author is the commit's author line.
func craft(t *testing.T, up *gittest.Upstreams, name, entry, author string) string {
	t.Helper()
	bare := filepath.Join(up.Dir, name+".git")
	if err := gittest.Git("", "init", "-q", "--bare", "-b", "main", bare); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := []string{"--git-dir=" + bare}
		out, err := gittestInput(stdin, append(cmd, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	blob := run("hello\n", "hash-object", "-w", "--stdin")
	tree := run("100644 blob "+blob+"\t"+entry+"\n", "mktree")
	commit := run("tree "+tree+"\n"+author+"\ncommitter A U Thor <a@example.org> 1700000000 +0000\n\ncrafted\n",
		"hash-object", "--literally", "-t", "commit", "-w", "--stdin")
	run("", "update-ref", "refs/heads/main", commit)
	return commit
}

func TestFetchRefusesATreeEntryNamedDotGIT(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	craft(t, up, "evil", ".GIT", "author A U Thor <a@example.org> 1700000000 +0000")
	url := up.RepoURL("evil")
	key := keyOf(t, url)
	_, err := st.Sync(context.Background(), key, url)
	if err == nil {
		t.Fatal("a repository with a .GIT tree entry was mirrored")
	}
	if c := gitcmd.ClassOf(err); c != gitcmd.ClassBadObjects {
		t.Fatalf("class = %q (%v), want %q", c, err, gitcmd.ClassBadObjects)
	}
	if !strings.Contains(err.Error(), "hasDotgit") {
		t.Errorf("the error does not say what was wrong: %v", err)
	}
	if st.Has(key) {
		t.Fatal("a refused clone left a mirror behind")
	}
}

func TestFetchMirrorsAHarmlessMalformedAuthorLine(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	// No space between the e-mail and the date: git fsck's
	// missingSpaceBeforeDate, found in old real repositories.
	commit := craft(t, up, "old", "README", "author A U Thor <a@example.org>1700000000 +0000")
	url := up.RepoURL("old")
	key := keyOf(t, url)
	res, err := st.Sync(context.Background(), key, url)
	if err != nil {
		t.Fatalf("a harmless defect was refused: %v", err)
	}
	if got := res.After.Refs["refs/heads/main"]; got != commit {
		t.Fatalf("main = %s, want %s", got, commit)
	}
}

// emptyAnObject empties the object file of repo that holds its objects
// (a pack, as a fetch over HTTP keeps them; a loose object otherwise), as
// a bad disk or a killed writer leaves it, and returns its path.
func emptyAnObject(t *testing.T, repo string) string {
	t.Helper()
	var loose, pack string
	_ = filepath.WalkDir(filepath.Join(repo, "objects"), func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil || d.IsDir():
		case strings.HasSuffix(p, ".pack") && pack == "":
			pack = p
		case len(filepath.Base(filepath.Dir(p))) == 2 && loose == "":
			loose = p
		}
		return nil
	})
	victim := pack
	if victim == "" {
		victim = loose
	}
	if victim == "" {
		t.Fatal("no object file to empty")
	}
	if err := os.Chmod(victim, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(victim, 0); err != nil {
		t.Fatal(err)
	}
	return victim
}

func TestVerifyFindsAnEmptiedObjectAndReplaceRepairsIt(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("a")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(ctx, key); err != nil {
		t.Fatalf("a whole mirror failed verification: %v", err)
	}
	emptyAnObject(t, st.Path(key))
	err := st.Verify(ctx, key)
	if !errors.Is(err, mirror.ErrCorrupt) {
		t.Fatalf("verify of a mirror with an emptied object = %v, want ErrCorrupt", err)
	}
	refs, err := st.Replace(ctx, key, url)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := up.Refs("a")
	if !reflect.DeepEqual(refs.Refs, want) {
		t.Fatalf("refs after repair = %v, want %v", refs.Refs, want)
	}
	if err := st.Verify(ctx, key); err != nil {
		t.Fatalf("the repaired mirror failed verification: %v", err)
	}
}

func TestVerifyFindsBitRotInsideAPackAndReplaceRepairsIt(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := up.AddBlob("a", "main", 8192); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("a")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(ctx, key); err != nil {
		t.Fatalf("a whole mirror failed verification: %v", err)
	}
	if _, _, err := gittest.RotPack(st.Path(key)); err != nil {
		t.Fatal(err)
	}
	err := st.Verify(ctx, key)
	if !errors.Is(err, mirror.ErrCorrupt) || !strings.Contains(err.Error(), "fails its CRC") {
		t.Fatalf("verify of a mirror with 64 bytes rotten inside a blob of its pack = %v, want ErrCorrupt naming the object", err)
	}
	if _, err := st.Replace(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(ctx, key); err != nil {
		t.Fatalf("the repaired mirror failed verification: %v", err)
	}
	if err := gittest.Git(st.Path(key), "fsck", "--no-dangling", "--no-progress"); err != nil {
		t.Fatalf("git fsck of the repaired mirror: %v", err)
	}
}

func TestVerifyFindsARefToAMissingCommit(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("a")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	ghost := filepath.Join(st.Path(key), "refs", "heads", "ghost")
	if err := os.WriteFile(ghost, []byte(strings.Repeat("ab", 20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(ctx, key); !errors.Is(err, mirror.ErrCorrupt) {
		t.Fatalf("verify of a mirror whose ref names a missing commit = %v, want ErrCorrupt", err)
	}
}

func TestVerifyFindsAnEmptiedLooseObject(t *testing.T) {
	t.Parallel()
	up, st := setup(t)
	if err := up.Create("a", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("a")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	oid, err := gittestInput("a loose object\n", "--git-dir="+st.Path(key), "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	oid = strings.TrimSpace(oid)
	p := filepath.Join(st.Path(key), "objects", oid[:2], oid[2:])
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(ctx, key); !errors.Is(err, mirror.ErrCorrupt) {
		t.Fatalf("verify of a mirror with an emptied loose object = %v, want ErrCorrupt", err)
	}
}

func TestFetchRemovesAStaleRefLockAndRetriesOnce(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	up, st := setup(t, mirror.WithClock(clk))
	if err := up.Create("a", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := up.RepoURL("a")
	key := keyOf(t, url)
	if _, err := st.Sync(ctx, key, url); err != nil {
		t.Fatal(err)
	}
	tip, err := up.Commit("a", "main")
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(st.Path(key), "refs", "heads", "main.lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, []byte("left by a killed git\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A young lock may belong to a git that runs: it is left alone.
	if _, err := st.Sync(ctx, key, url); err == nil || !strings.Contains(err.Error(), "lock file is held") {
		t.Fatalf("sync with a young lock = %v, want a held-lock error", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatal("a young lock was removed")
	}

	// Older than the git timeout, no git of ours can hold it.
	clk.Advance(11 * time.Minute)
	res, err := st.Sync(ctx, key, url)
	if err != nil {
		t.Fatalf("sync with a stale lock: %v", err)
	}
	if got := res.After.Refs["refs/heads/main"]; got != tip {
		t.Fatalf("main = %s, want %s", got, tip)
	}
	if _, err := os.Stat(lock); err == nil {
		t.Fatal("the stale lock is still there")
	}
}

func TestRetiredMirrorComesBackAndExpires(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	up, st := setup(t, mirror.WithClock(clk))
	for _, name := range []string{"a", "b"} {
		if err := up.Create(name, []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	ka, kb := keyOf(t, up.RepoURL("a")), keyOf(t, up.RepoURL("b"))
	for _, k := range []repokey.Key{ka, kb} {
		url := up.RepoURL(strings.TrimPrefix(string(k[strings.LastIndex(string(k), "/"):]), "/"))
		if _, err := st.Sync(ctx, k, url); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(st.Path(ka), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []repokey.Key{ka, kb} {
		if err := st.Retire(context.Background(), k); err != nil {
			t.Fatal(err)
		}
		if st.Has(k) {
			t.Fatalf("%s is still in the served tree after Retire", k)
		}
	}
	back, err := st.Unretire(ka)
	if err != nil || !back {
		t.Fatalf("Unretire = %v, %v", back, err)
	}
	fi2, err := os.Stat(filepath.Join(st.Path(ka), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi, fi2) {
		t.Fatal("the restored mirror is not the retired directory")
	}
	clk.Advance(8 * 24 * time.Hour)
	expired, err := st.SweepRetired(7 * 24 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(expired, []repokey.Key{kb}) {
		t.Fatalf("expired = %v, want [%s]", expired, kb)
	}
	if back, _ := st.Unretire(kb); back {
		t.Fatal("an expired mirror came back")
	}
}

// gittestInput runs git with stdin and returns its stdout.
func gittestInput(stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
