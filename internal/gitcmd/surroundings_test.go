package gitcmd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// plantRepository makes dir a work tree whose .git/config holds settings,
// as a source checkout that gitfleet is started from may.
func plantRepository(t *testing.T, dir string, settings ...string) {
	t.Helper()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		if out, err := exec.Command("git", "-C", dir, "config", k, v).CombinedOutput(); err != nil {
			t.Fatalf("git config %s: %v: %s", kv, err, out)
		}
	}
}

func TestTheStartingDirectorysRepositoryDoesNotRewriteUpstreams(t *testing.T) {
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("r", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	// Every http:// URL would go to a port where nothing listens.
	cwd := t.TempDir()
	plantRepository(t, cwd, "url.http://127.0.0.1:1/.insteadOf=http://")
	sub := filepath.Join(cwd, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{cwd, sub} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Chdir(dir)
			// The same git, run plainly from here, is rewritten: the
			// planted setting works, so the test can fail.
			if err := exec.Command("git", "ls-remote", "--", up.RepoURL("r")).Run(); err == nil {
				t.Fatal("plain git ls-remote succeeded: the planted insteadOf was not applied, the test proves nothing")
			}
			refs, err := gitcmd.New(gitcmd.Direct(), gitcmd.Options{}).LsRemote(context.Background(), up.RepoURL("r"))
			if err != nil {
				t.Fatalf("ls-remote through the Runner from a directory with url.insteadOf: %v", err)
			}
			if len(refs.Refs) != 1 || refs.Refs["refs/heads/main"] == "" {
				t.Fatalf("refs = %v, want refs/heads/main", refs.Refs)
			}
		})
	}
}

func TestAFoundBareRepositoryIsNotUsed(t *testing.T) {
	// The starting directory is a bare repository with hooks and an
	// insteadOf of its own: a command without --git-dir must not take it.
	cwd := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", cwd).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Chdir(cwd)
	out, err := gitcmd.New(gitcmd.Direct(), gitcmd.Options{}).Output(context.Background(), gitcmd.Cmd{Name: "rev-parse", Flags: []string{"--absolute-git-dir"}})
	if err == nil {
		t.Fatalf("rev-parse found a repository: %q", out)
	}
	// An operator's repository named by Dir (catalog check) is still found.
	out, err = gitcmd.New(gitcmd.Direct(), gitcmd.Options{}).Output(context.Background(), gitcmd.Cmd{Dir: cwd, Name: "rev-parse", Flags: []string{"--absolute-git-dir"}})
	if err != nil {
		t.Fatalf("rev-parse in Dir: %v", err)
	}
	if got, _ := filepath.EvalSymlinks(strings.TrimSpace(string(out))); got != mustEval(t, cwd) {
		t.Fatalf("rev-parse in Dir = %q, want %q", got, cwd)
	}
}

func TestARelativeGitDirIsRefused(t *testing.T) {
	err := gitcmd.New(gitcmd.Direct(), gitcmd.Options{}).Run(context.Background(), gitcmd.Cmd{GitDir: "data/repos/x.git", Name: "for-each-ref"})
	if err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Fatalf("err = %v, want a refusal of the relative git directory", err)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
