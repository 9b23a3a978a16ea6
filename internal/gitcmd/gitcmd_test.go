package gitcmd

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestUnsafeCommandsAreRefusedBeforeGitRuns(t *testing.T) {
	r := New(Direct(), Options{})
	for _, tc := range []struct {
		name string
		cmd  Cmd
		want string
	}{
		{"unknown subcommand", Cmd{Name: "daemon"}, "not allowed"},
		{"unknown verb of a known subcommand", Cmd{Name: "commit-graph verify"}, "not allowed"},
		{"a subcommand without its verb", Cmd{Name: "commit-graph"}, "not allowed"},
		{"option smuggled as a URL", Cmd{Name: "ls-remote", Args: []string{"--upload-pack=touch /tmp/x"}}, "may not be empty or start with '-'"},
		{"empty argument", Cmd{Name: "ls-remote", Args: []string{""}}, "may not be empty"},
		{"config that is an option", Cmd{Name: "init", Config: []string{"-x"}}, "bad config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Run(context.Background(), tc.cmd)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestArgumentsFollowASeparator(t *testing.T) {
	args, err := New(Direct(), Options{}).argv(&Cmd{Name: "fetch", Flags: []string{"--prune"}, Args: []string{"https://h/r", "+refs/*:refs/*"}})
	if err != nil {
		t.Fatal(err)
	}
	tail := strings.Join(args[len(args)-4:], " ")
	if tail != "--prune -- https://h/r +refs/*:refs/*" {
		t.Fatalf("argv tail = %q", tail)
	}
}

func TestLocalPathsAreNotFetchedUnlessAllowed(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "r.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", repo).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	_, err := New(Direct(), Options{}).LsRemote(context.Background(), repo)
	if err == nil {
		t.Fatal("a local path was readable with the default protocol allow-list")
	}
	if _, err := New(LocalOnly(), Options{}).LsRemote(context.Background(), repo); err != nil {
		t.Fatalf("with file allowed: %v", err)
	}
}

func TestLocalKeepsTheOptionsAndReachesOnlyThisMachine(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "r.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", repo).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	up := New(Direct(), Options{Timeout: 7 * time.Second})
	local := up.Local()
	if local.Timeout() != 7*time.Second {
		t.Fatalf("Local's timeout = %v, want the runner's 7s", local.Timeout())
	}
	if _, err := local.LsRemote(context.Background(), repo); err != nil {
		t.Fatalf("a local path through Local: %v", err)
	}
	if _, err := local.LsRemote(context.Background(), "https://127.0.0.1:1/r"); err == nil {
		t.Fatal("Local reached an https URL")
	}
}

func TestTimeoutKillsGitAndIsClassified(t *testing.T) {
	// upload-pack waits for a request on stdin that never comes.
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	pr, pw := newBlockingPipe(t)
	defer pw.Close()
	err := New(Direct(), Options{}).Run(context.Background(), Cmd{Name: "upload-pack", Flags: []string{"--stateless-rpc"}, Args: []string{dir}, Stdin: pr, Timeout: 300 * time.Millisecond})
	if ClassOf(err) != ClassTimeout {
		t.Fatalf("class = %s (%v), want timeout", ClassOf(err), err)
	}
}

func TestClassifyStderr(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   Class
	}{
		{"remote: Repository not found.\nfatal: repository 'https://github.com/a/b/' not found", ClassDeleted},
		{"fatal: unable to access 'https://h/r/': The requested URL returned error: 404", ClassDeleted},
		{"remote: nope\nfatal: unable to access 'https://h/r/': The requested URL returned error: 410", ClassDeleted},
		{"ERROR: Repository not found.\nfatal: Could not read from remote repository.", ClassNotFound},
		{"fatal: '/srv/x' does not appear to be a git repository", ClassNotFound},
		// A server's body (remote: lines) does not say what it answered.
		{"remote: The requested URL returned error: 451\nfatal: repository 'https://h/r/' not found", ClassDeleted},
		{"remote: fatal: repository 'https://h/r/' not found\nfatal: unable to access 'https://h/r/': The requested URL returned error: 500", ClassNetwork},
		{"fatal: could not read Username for 'https://github.com': terminal prompts disabled", ClassAuth},
		{"fatal: unable to access 'https://h/': SSL certificate problem: unable to get local issuer certificate", ClassTLS},
		{"fatal: unable to access 'https://h/': Could not resolve host: h", ClassNetwork},
		{"fatal: unable to access 'https://h/': The requested URL returned error: 429", ClassThrottled},
		{"fatal: unable to access 'https://h/r/': The requested URL returned error: 451", ClassLegal},
		{"fatal: unable to access 'http://127.0.0.1:18765/a.git/': The requested URL returned error: 302", ClassBlocked},
		{"fatal: unable to access 'https://h/r/': The requested URL returned error: 308", ClassBlocked},
		{"error: unable to write file: No space left on device", ClassDisk},
		{"fatal: Out of memory, malloc failed (tried to allocate 41943041 bytes)", ClassTooLarge},
		{"error: object 0123: hasDotgit: contains '.git'\nfatal: fsck error in packed object\nfatal: index-pack failed", ClassBadObjects},
		{"error: object file ./objects/ab/cdef is empty\nfatal: loose object abcdef (stored in ./objects/ab/cdef) is corrupt", ClassBadObjects},
		{"fatal: something else", ClassOther},
	} {
		if got := classify(tc.stderr, nil); got != tc.want {
			t.Errorf("classify(%q) = %s, want %s", tc.stderr, got, tc.want)
		}
	}
}

func TestParseLsRemoteKeepsBranchesAndTagsOnly(t *testing.T) {
	out := "ref: refs/heads/main\tHEAD\n" +
		"1111111111111111111111111111111111111111\tHEAD\n" +
		"1111111111111111111111111111111111111111\trefs/heads/main\n" +
		"2222222222222222222222222222222222222222\trefs/tags/v1\n" +
		"3333333333333333333333333333333333333333\trefs/tags/v1^{}\n" +
		"4444444444444444444444444444444444444444\trefs/pull/1/head\n" +
		"garbage line\n"
	refs := parseLsRemote([]byte(out))
	if refs.Head != "refs/heads/main" || len(refs.Refs) != 2 || refs.Refs["refs/tags/v1"] != strings.Repeat("2", 40) {
		t.Fatalf("got %+v", refs)
	}
	other := Refs{Refs: map[string]string{"refs/tags/v1": strings.Repeat("2", 40), "refs/heads/main": strings.Repeat("1", 40)}}
	if refs.Digest() != other.Digest() || refs.Digest() == "" {
		t.Fatal("digest depends on more than the refs")
	}
	other.Refs["refs/heads/main"] = strings.Repeat("5", 40)
	if refs.Digest() == other.Digest() {
		t.Fatal("digest ignores a moved branch")
	}
}

func TestBareRepositoriesAreUsedOnlyWhenNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  Cmd
		want bool
	}{
		{"fetch into a named mirror", Cmd{GitDir: "/data/repos/a.git", Name: "fetch", Args: []string{"https://h/r"}}, true},
		{"ls-remote of an upstream", Cmd{Name: "ls-remote", Args: []string{"https://h/r"}}, true},
		{"upload-pack of a named directory", Cmd{Name: "upload-pack", Args: []string{"/data/repos/a.git"}}, true},
		{"an operator's repository found from Dir", Cmd{Dir: "/srv/catalog", Name: "rev-parse"}, false},
	} {
		args, err := New(Direct(), Options{}).argv(&tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(strings.Join(args, " "), "-c safe.bareRepository=explicit")
		if got != tc.want {
			t.Errorf("%s: safe.bareRepository=explicit pinned: %v, want %v (%q)", tc.name, got, tc.want, args)
		}
	}
}
