// Package e2e runs gitfleet as real processes against real git servers on
// 127.0.0.1 and checks what a user would see.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/testnet"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gitfleet-e2e-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "gitfleet")
	build := exec.Command("go", "build", "-o", binary, "../cmd/gitfleet")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gitfleet:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sourcesSeen makes go test's cache of this package's results depend on
// every source file of the module. The processes under test run a binary
// that TestMain builds from them, which the cache cannot see: without
// this, a change outside the packages e2e imports would be answered with
// a cached pass. The cache keys on the files a test opens, so the first
// process each test starts opens them all.
var sourcesSeen sync.Once

func seeSources() {
	_ = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && path != ".." && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum":
			if f, err := os.Open(path); err == nil {
				f.Close()
			}
		}
		return nil
	})
}

// proc is one gitfleet process.
type proc struct {
	name    string
	test    string     // the top-level test (or benchmark) that started it
	owner   testing.TB // the test or subtest whose end stops it
	cmd     *exec.Cmd
	log     string
	done    chan struct{}
	exit    error       // how it ended; read after done is closed
	stopped atomic.Bool // the test ended it: not a death to report
	termed  atomic.Bool // SIGTERM sent
}

// live holds the processes the running tests have started, so that
// eventually stops waiting at once when one of its test's dies. Tests that
// call t.Parallel run beside others: each watches its own processes only.
var live struct {
	sync.Mutex
	procs map[*proc]struct{}
}

// topTest is the name of the top-level test (or benchmark) that t is or is
// a subtest of.
func topTest(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return name
}

// died returns an error naming the first process of t's top-level test
// that ended while the test still wanted it, or nil.
func died(t testing.TB) error {
	test := topTest(t)
	live.Lock()
	defer live.Unlock()
	for p := range live.procs {
		if p.test != test {
			continue
		}
		select {
		case <-p.done:
			if !p.stopped.Load() {
				return fmt.Errorf("%s ended by itself (%v); its log is below", p.name, p.exit)
			}
		default:
		}
	}
	return nil
}

// start runs gitfleet with args; its output goes to a log file that is
// printed when the test fails.
func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return startIn(t, "", name, args...)
}

// startIn is start with dir as gitfleet's working directory ("": the
// test's).
func startIn(t testing.TB, dir, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	return startCmd(t, name, cmd)
}

// startCmd is start for a gitfleet process that cmd starts however it
// must (a shell that execs it, say, for a command line as a user types
// it): cmd must become that process, so that stopping it stops gitfleet.
func startCmd(t testing.TB, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	sourcesSeen.Do(seeSources)
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, test: topTest(t), owner: t, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { p.exit = cmd.Wait(); f.Close(); close(p.done) }()
	live.Lock()
	if live.procs == nil {
		live.procs = map[*proc]struct{}{}
	}
	live.procs[p] = struct{}{}
	live.Unlock()
	t.Cleanup(func() {
		termAll(t)
		p.stop()
		live.Lock()
		delete(live.procs, p)
		live.Unlock()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("---- log of %s ----\n%s", name, b)
		}
	})
	return p
}

// count is how many times s appears in p's log.
func (p *proc) count(s string) int { return strings.Count(readLog(p), s) }

// termAll sends SIGTERM to every process that t's end stops, so that
// they shut down side by side: the first of their clean-ups asks them
// all, and each waits for its own (a fleet's four processes took four
// shutdowns one after the other).
func termAll(t testing.TB) {
	live.Lock()
	defer live.Unlock()
	for p := range live.procs {
		if p.owner == t {
			p.term()
		}
	}
}

// term marks p stopped by its test and sends it SIGTERM, once.
func (p *proc) term() {
	p.stopped.Store(true)
	select {
	case <-p.done:
		return
	default:
	}
	if !p.termed.Swap(true) {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
}

func (p *proc) stop() {
	p.term()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) kill() {
	p.stopped.Store(true)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// freeAddr returns a 127.0.0.1 address for a process to listen on, with a
// port that no outgoing connection can take first.
func freeAddr(t testing.TB) string { return testnet.Addr(t) }

// eventually polls cond until it returns nil or the timeout passes. It
// gives up at once when a process the test started has died.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var err error
	lastLog := start
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			t.Logf("%s: after %v", what, time.Since(start).Round(10*time.Millisecond))
			return
		}
		if dead := died(t); dead != nil {
			t.Fatalf("%s: %v (last: %v)", what, dead, err)
		}
		if time.Since(lastLog) > 10*time.Second {
			t.Logf("%s: still waiting after %v: %v", what, time.Since(start).Round(time.Second), err)
			lastLog = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}

type apiRepo struct {
	Key     string `json:"key"`
	Owner   uint32 `json:"owner_node"`
	State   string `json:"state"`
	Current bool   `json:"current"`
	Served  bool   `json:"served"`
	Error   string `json:"last_error"`
	// Class is the error's class, as the node that failed said it.
	Class string `json:"error_class"`
	// Network is the fork network the repository is in ("": standalone);
	// NetworkParts, above 1, the parts it is split into.
	Network      string `json:"network"`
	NetworkParts uint32 `json:"network_parts"`
	// StateSince is when a departed or archived repository's state was
	// first seen ("": another state).
	StateSince string `json:"state_since"`
	// RenamedTo is a renamed repository's new name, as a key.
	RenamedTo string `json:"renamed_to"`
}

func apiRepos(base string) (map[string]apiRepo, error) { return apiReposAs(base, "") }

// apiReposAs is apiRepos as the operator, who sees the errors' details
// (anonymous readers see their classes).
func apiReposAs(base, token string) (map[string]apiRepo, error) {
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/repos?limit=1000", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Repos []apiRepo `json:"repos"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	out := map[string]apiRepo{}
	for _, r := range body.Repos {
		out[r.Key] = r
	}
	return out, nil
}

// lsRemote lists the branches and tags a git server offers for url.
func lsRemote(url string) (map[string]string, error) {
	cmd := exec.Command("git", "ls-remote", "--refs", "--", url)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ls-remote %s: %w: %s", url, err, stderr.String())
	}
	refs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		oid, name, ok := strings.Cut(line, "\t")
		if ok && (strings.HasPrefix(name, "refs/heads/") || strings.HasPrefix(name, "refs/tags/")) {
			refs[name] = oid
		}
	}
	return refs, nil
}
