package gitcmd

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Each subcommand takes the flags its table lists, and no other: a flag that
// runs a program, reads a configuration or a template, or is merely not
// gitfleet's is refused before git starts, as is a value in a word of its own.
func TestFlagsTheSubcommandDoesNotListAreRefused(t *testing.T) {
	r := New(Direct(), Options{})
	for _, tc := range []struct {
		name string
		cmd  Cmd
		want string
	}{
		{"a program to run as the upstream's upload-pack", Cmd{Name: "fetch", Flags: []string{"--upload-pack=touch /tmp/x"}}, "may take"},
		{"ls-remote's program to run", Cmd{Name: "ls-remote", Flags: []string{"--upload-pack=touch /tmp/x"}}, "may take"},
		{"clone's configuration", Cmd{Name: "clone", Flags: []string{"--config=core.hooksPath=/tmp"}}, "may take"},
		{"a template with hooks", Cmd{Name: "init", Flags: []string{"--template=/tmp/hooks"}}, "may take"},
		{"an abbreviation git would accept", Cmd{Name: "fetch", Flags: []string{"--qui"}}, "may take"},
		{"another subcommand's flag", Cmd{Name: "fetch", Flags: []string{"--batch"}}, "may take"},
		{"a fixed value changed", Cmd{Name: "commit-graph write", Flags: []string{"--split=no-merge"}}, "may take"},
		{"a value in a word of its own", Cmd{Name: "fetch", Flags: []string{"--depth", "1"}}, "same word"},
		{"a flag without a dash", Cmd{Name: "fetch", Flags: []string{"origin"}}, "may take"},
		{"arguments to a subcommand given none", Cmd{Name: "rev-list", Args: []string{"HEAD"}}, "no positional arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.argv(&tc.cmd); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestListedFlagsPassWithTheirValues(t *testing.T) {
	r := New(Direct(), Options{})
	for _, c := range []Cmd{
		{Name: "fetch", Flags: []string{"--depth=1", "--filter=blob:none", "--quiet"}},
		{Name: "init", Flags: []string{"--template=", "--initial-branch=main"}},
		{Name: "commit-graph write", Flags: []string{"--split", "--split=replace"}},
		{Name: "rev-list", Flags: []string{"--exclude=refs/gitfleet/*", "--not", "--stdin"}},
	} {
		args, err := r.argv(&c)
		if err != nil {
			t.Fatalf("git %s %v: %v", c.Name, c.Flags, err)
		}
		if tail := strings.Join(args[len(args)-len(c.Flags):], " "); tail != strings.Join(c.Flags, " ") {
			t.Errorf("git %s: argv ends %q, want the flags as given", c.Name, tail)
		}
	}
}

// "--" would mean "paths follow" to rev-parse, cat-file and the like: their
// arguments follow --end-of-options, chosen by the table, not the caller.
func TestArgumentsFollowTheSeparatorOfTheirSubcommand(t *testing.T) {
	r := New(Direct(), Options{})
	for name, want := range map[string]string{
		"rev-parse": "--end-of-options", "cat-file": "--end-of-options", "diff-tree": "--end-of-options",
		"ls-tree": "--end-of-options", "merge-base": "--end-of-options", "read-tree": "--end-of-options",
		"fetch": "--", "ls-remote": "--", "init": "--", "update-ref": "--", "upload-pack": "--",
	} {
		args, err := r.argv(&Cmd{Name: name, Args: []string{"x"}})
		if err != nil {
			t.Fatalf("git %s: %v", name, err)
		}
		if got := args[len(args)-2]; got != want {
			t.Errorf("git %s: %q before its argument, want %q", name, got, want)
		}
	}
}

// newTestRepo makes a bare repository holding one blob, with plain git, and
// returns its path and the blob's id.
func newTestRepo(t *testing.T) (string, string) {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "r.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", repo).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cmd := exec.Command("git", "--git-dir="+repo, "hash-object", "-w", "--stdin")
	cmd.Stdin = strings.NewReader("x\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return repo, strings.TrimSpace(string(out))
}

// A caller's settings come before the runner's, and git takes the last of a
// key: a caller's hooks path (as -c or in the environment) runs no hook.
func TestACallersHooksPathDoesNotWin(t *testing.T) {
	repo, oid := newTestRepo(t)
	hooks := t.TempDir()
	ran := filepath.Join(t.TempDir(), "hook-ran")
	script := "#!/bin/sh\necho ran >> " + ran + "\ncat >/dev/null\n"
	if err := os.WriteFile(filepath.Join(hooks, "reference-transaction"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The hook works: plain git given that hooks path runs it.
	if out, err := exec.Command("git", "-c", "core.hooksPath="+hooks, "--git-dir="+repo,
		"update-ref", "refs/tags/plain", oid).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("plain git did not run the hook, so the test proves nothing: %v", err)
	}
	if err := os.Remove(ran); err != nil {
		t.Fatal(err)
	}
	r := New(LocalOnly(), Options{})
	for name, c := range map[string]Cmd{
		"as -c": {Config: []string{"core.hooksPath=" + hooks}},
		"in the environment": {Env: []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath",
			"GIT_CONFIG_VALUE_0=" + hooks}},
		"as GIT_CONFIG_PARAMETERS": {Env: []string{"GIT_CONFIG_PARAMETERS='core.hooksPath'='" + hooks + "'"}},
	} {
		c.GitDir, c.Name, c.Args = repo, "update-ref", []string{"refs/tags/t", oid}
		err := r.Run(context.Background(), c)
		switch {
		case len(c.Env) > 0 && (err == nil || !strings.Contains(err.Error(), "environment")):
			t.Fatalf("%s: err = %v, want the environment refused before git runs", name, err)
		case len(c.Env) == 0 && err != nil:
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%s: the caller's hook ran", name)
		}
	}
}

// Nor can a caller widen the protocol allow-list: a local path stays out of
// reach of a runner for upstreams, whatever the caller sets.
func TestACallersProtocolSettingsDoNotWin(t *testing.T) {
	repo, _ := newTestRepo(t)
	r := New(Direct(), Options{})
	for name, c := range map[string]Cmd{
		"protocol.allow as -c": {Config: []string{"protocol.allow=always", "protocol.file.allow=always"}},
		"GIT_ALLOW_PROTOCOL":   {Env: []string{"GIT_ALLOW_PROTOCOL=file"}},
	} {
		c.Name, c.Args = "ls-remote", []string{repo}
		if err := r.Run(context.Background(), c); err == nil {
			t.Errorf("%s: a local path was read by a runner for upstreams", name)
		}
	}
	if err := New(LocalOnly(), Options{}).Run(context.Background(), Cmd{Name: "ls-remote", Args: []string{repo}}); err != nil {
		t.Fatalf("the same path through a local runner: %v", err)
	}
}

// countingEgress is an egress policy that counts the processes it was asked
// to route, and routes them nowhere different.
type countingEgress struct{ begun atomic.Int64 }

func (e *countingEgress) Begin() ([]string, func() error) {
	e.begun.Add(1)
	return nil, func() error { return nil }
}

// A command marked Peer goes around the egress policy, and only to this
// machine: one that names any other host is refused before git runs.
func TestAPeerCommandGoesAroundTheEgressOnlyToThisMachine(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	e := &countingEgress{}
	r := New(Through(e), Options{Protocols: "http"})
	ctx := context.Background()

	_ = r.Run(ctx, Cmd{Name: "ls-remote", Args: []string{srv.URL + "/peer.git"}, Peer: true})
	if e.begun.Load() != 0 || requests.Load() == 0 {
		t.Fatalf("peer command: %d egress routings, %d requests; want none and the peer asked", e.begun.Load(), requests.Load())
	}
	_ = r.Run(ctx, Cmd{Name: "ls-remote", Args: []string{srv.URL + "/upstream.git"}})
	if e.begun.Load() != 1 {
		t.Fatalf("unmarked command: %d egress routings, want 1", e.begun.Load())
	}
	asked := requests.Load()
	for _, u := range []string{"http://localhost" + strings.TrimPrefix(srv.URL, "http://127.0.0.1") + "/peer.git",
		"http://192.0.2.1/peer.git", "https://127.0.0.1:1/peer.git", "/srv/peer.git"} {
		err := r.Run(ctx, Cmd{Name: "ls-remote", Args: []string{u}, Peer: true})
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("peer command to %s: err = %v, want a refusal", u, err)
		}
	}
	if requests.Load() != asked || e.begun.Load() != 1 {
		t.Fatalf("a refused peer command ran git (%d requests, %d routings)", requests.Load()-asked, e.begun.Load())
	}
}

// A caller's environment may name only the variables env.go allows: one
// that would change what git runs or where it connects is refused before
// git starts, and the allowed ones reach git (an extra header, sent).
func TestACallersEnvironmentIsAllowListed(t *testing.T) {
	var headers atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Gitfleet-Test") == "yes" {
			headers.Add(1)
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	r := New(Direct(), Options{Protocols: "http"})
	ctx := context.Background()
	for _, env := range [][]string{
		{"GIT_EXEC_PATH=/tmp"},
		{"GIT_SSH_COMMAND=touch /tmp/pwned"},
		{"LD_PRELOAD=/tmp/evil.so"},
		{"GIT_CONFIG_PARAMETERS='core.sshCommand'='touch /tmp/pwned'"},
		{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.sshCommand", "GIT_CONFIG_VALUE_0=touch /tmp/pwned"},
		{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=url.http://evil/.insteadOf", "GIT_CONFIG_VALUE_0=" + srv.URL},
		{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=X-A: b"},
		{"GIT_CONFIG_KEY_X=http.extraHeader"},
		{"NOEQUALS"},
	} {
		err := r.Run(ctx, Cmd{Name: "ls-remote", Args: []string{srv.URL + "/r.git"}, Env: env})
		var ge *Error
		if err == nil || errors.As(err, &ge) {
			t.Errorf("env %q: err = %v, want a refusal before git runs", env, err)
		}
	}
	for _, env := range [][]string{
		{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=X-Gitfleet-Test: yes"},
		{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http." + srv.URL + "/.extraHeader", "GIT_CONFIG_VALUE_0=X-Gitfleet-Test: yes",
			"GIT_HTTP_LOW_SPEED_LIMIT=1000", "GIT_HTTP_LOW_SPEED_TIME=30", "GIT_PROTOCOL=version=2"},
	} {
		before := headers.Load()
		err := r.Run(ctx, Cmd{Name: "ls-remote", Args: []string{srv.URL + "/r.git"}, Env: env})
		var ge *Error
		if !errors.As(err, &ge) {
			t.Errorf("env %q: err = %v, want git to run (and fail on the 404)", env, err)
		}
		if headers.Load() == before {
			t.Errorf("env %q: the extra header never reached the server", env)
		}
	}
}
