package gitserve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// cached gives a fixture's Handler a pack cache of max bytes, then tunes it.
func cached(t *testing.T, max int64, tune func(h *gitserve.Handler)) func(h *gitserve.Handler) {
	return func(h *gitserve.Handler) {
		c, err := gitserve.NewPackCache(filepath.Join(t.TempDir(), "packcache"),
			gitserve.CacheConfig{MaxBytes: max, TTL: 5 * time.Minute}, h.Clock)
		if err != nil {
			t.Fatal(err)
		}
		h.Cache = c
		if tune != nil {
			tune(h)
		}
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdRuns makes the Handler's shared runs wait, once they have their
// slot, until the returned function is called (runs after that go on at
// once). It counts the runs that reached the gate.
func holdRuns(h *gitserve.Handler) (release func(), reached *atomic.Int64) {
	gate := make(chan struct{})
	reached = new(atomic.Int64)
	gitserve.SetBeforeRun(h, func(string) {
		reached.Add(1)
		<-gate
	})
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }, reached
}

// cloneInto runs a stock git clone (protocol v2) of url into a new
// directory, with extra arguments before the URL.
func cloneInto(t *testing.T, url string, args ...string) (string, error) {
	dir := filepath.Join(t.TempDir(), "c.git")
	args = append(append([]string{"-c", "protocol.version=2", "clone", "-q", "--bare"}, args...), url, dir)
	out, err := gittest.Output("", args...)
	if err != nil {
		return "", fmt.Errorf("clone: %w: %s", err, out)
	}
	if out, err := gittest.Output(dir, "fsck", "--strict", "--no-dangling"); err != nil {
		return "", fmt.Errorf("fsck of the clone: %w: %s", err, out)
	}
	return dir, nil
}

func revParse(t *testing.T, dir, rev string) string {
	t.Helper()
	out, err := gittest.Output(dir, "rev-parse", rev)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// addBlobCommit commits size random bytes as a new file on branch of the
// bare repository (made from main when missing) and returns the commit.
func addBlobCommit(t *testing.T, repo, branch string, size int, seed uint64) string {
	t.Helper()
	from := "refs/heads/" + branch
	if _, err := gittest.Output(repo, "rev-parse", "--verify", "-q", from); err != nil {
		from = "refs/heads/main"
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = repo
	cmd.Env = gittest.Env()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(in)
	blob := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(blob)
	fmt.Fprintf(w, "blob\nmark :1\ndata %d\n", size)
	_, _ = w.Write(blob)
	fmt.Fprintf(w, "\ncommit refs/heads/%s\ncommitter t <t@gitfleet.invalid> 1700000000 +0000\ndata 5\nblob\nfrom %s^0\nM 100644 :1 blob-%d\n\n",
		branch, from, seed)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	return revParse(t, repo, "refs/heads/"+branch)
}

// cacheFiles is the bytes of the files in the cache's directory.
func cacheFiles(t *testing.T, dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func TestEightConcurrentIdenticalClonesRunOneUploadPack(t *testing.T) {
	f := newFixture(t, cached(t, 1<<30, nil))
	tip := addBlobCommit(t, f.repo, "main", 1<<20, 1)
	release, _ := holdRuns(f.h)
	defer release()
	const n = 8
	errs := make(chan error, n)
	dirs := make(chan string, n)
	for range n {
		go func() {
			dir, err := cloneInto(t, f.url)
			errs <- err
			dirs <- dir
		}()
	}
	// The first run waits until every clone follows it.
	waitFor(t, "8 clones on one run", func() bool { return f.h.Cache.Stats().Watching == n })
	release()
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
		if dir := <-dirs; dir != "" && revParse(t, dir, "main") != tip {
			t.Errorf("a clone's main is not %s", tip)
		}
	}
	if s := f.h.Cache.Stats(); s.Runs != 1 || s.Shared != n-1 {
		t.Fatalf("8 identical clones: %d runs, %d shared, want 1 run shared by 7 (%+v)", s.Runs, s.Shared, s)
	}
}

func TestALateIdenticalCloneIsServedFromDiskAndANewCommitIsNot(t *testing.T) {
	f := newFixture(t, cached(t, 1<<30, nil))
	if _, err := cloneInto(t, f.url); err != nil {
		t.Fatal(err)
	}
	if _, err := cloneInto(t, f.url); err != nil {
		t.Fatal(err)
	}
	if s := f.h.Cache.Stats(); s.Runs != 1 || s.Hits != 1 || s.Entries != 1 {
		t.Fatalf("a second clone after the first ended: %+v, want 1 run, 1 hit, 1 entry", s)
	}
	tip, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := cloneInto(t, f.url)
	if err != nil {
		t.Fatal(err)
	}
	if got := revParse(t, dir, "main"); got != tip {
		t.Fatalf("after a new commit, a clone's main is %s, want %s", got, tip)
	}
	if s := f.h.Cache.Stats(); s.Runs != 2 {
		t.Fatalf("a clone after a new commit: %d runs, want 2", s.Runs)
	}
	// The very same request, once any ref moved, runs again: the refs
	// decide which tags go with the pack and what is served.
	body := v2Fetch("want "+tip, "done")
	for range 2 {
		if code, _, resp := f.post(t, body, v2); code != http.StatusOK {
			t.Fatalf("fetch: %d %q", code, resp)
		}
	}
	if err := gittest.Git(f.repo, "update-ref", "refs/heads/other", tip); err != nil {
		t.Fatal(err)
	}
	if code, _, resp := f.post(t, body, v2); code != http.StatusOK {
		t.Fatalf("fetch: %d %q", code, resp)
	}
	if s := f.h.Cache.Stats(); s.Runs != 4 || s.Hits != 2 {
		t.Fatalf("one request twice, then after a ref moved: %+v, want 4 runs and 2 hits in all", s)
	}
}

func TestConcurrentClonesOfDifferentBranchesAreNotMixed(t *testing.T) {
	f := newFixture(t, cached(t, 1<<30, nil))
	mainTip := addBlobCommit(t, f.repo, "main", 256<<10, 1)
	devTip := addBlobCommit(t, f.repo, "dev", 256<<10, 2)
	release, reached := holdRuns(f.h)
	defer release()
	type result struct {
		branch, dir string
		err         error
	}
	results := make(chan result, 4)
	for _, b := range []string{"main", "dev", "main", "dev"} {
		go func() {
			dir, err := cloneInto(t, f.url, "--single-branch", "--branch", b)
			results <- result{b, dir, err}
		}()
	}
	waitFor(t, "two runs and four clients", func() bool { return reached.Load() == 2 && f.h.Cache.Stats().Watching == 4 })
	release()
	for range 4 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		want := map[string]string{"main": mainTip, "dev": devTip}[r.branch]
		if got := revParse(t, r.dir, "HEAD"); got != want {
			t.Errorf("clone of %s: HEAD %s, want %s", r.branch, got, want)
		}
		other := map[string]string{"main": devTip, "dev": mainTip}[r.branch]
		if _, err := gittest.Output(r.dir, "cat-file", "-e", other); err == nil {
			t.Errorf("clone of %s holds the other branch's commit", r.branch)
		}
	}
	if s := f.h.Cache.Stats(); s.Runs != 2 || s.Shared != 2 {
		t.Fatalf("two branches, two clones each: %+v, want 2 runs, 2 shared", s)
	}
}

// rawFetch sends body and reads n bytes of the answer, then hangs up.
func rawFetch(t *testing.T, f *fixture, body []byte, n int) error {
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /example.com/r.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nGit-Protocol: version=2\r\n"+
		"Content-Type: application/x-git-upload-pack-request\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	_, err = io.ReadFull(conn, make([]byte, n))
	return err
}

func TestAClientThatHangsUpDoesNotBreakTheOthers(t *testing.T) {
	f := newFixture(t, cached(t, 1<<30, nil))
	addBlobCommit(t, f.repo, "main", 8<<20, 1)
	// What git sends for a clone, to replay with a client that leaves.
	if _, err := cloneInto(t, f.url); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	body := f.posts[len(f.posts)-1]
	f.mu.Unlock()
	// A ref that clones do not fetch moves: the same request no longer
	// finds the kept answer, and makes a new run.
	if err := gittest.Git(f.repo, "update-ref", "refs/pull/1/head", "main"); err != nil {
		t.Fatal(err)
	}
	release, _ := holdRuns(f.h)
	defer release()
	left := make(chan error, 1)
	go func() { left <- rawFetch(t, f, body, 1024) }() // starts the run, then leaves
	waitFor(t, "the first client on the run", func() bool { return f.h.Cache.Stats().Watching == 1 })
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := cloneInto(t, f.url)
			errs <- err
		}()
	}
	waitFor(t, "four clients on the run", func() bool { return f.h.Cache.Stats().Watching == 4 })
	release()
	if err := <-left; err != nil {
		t.Fatalf("the client that hangs up: %v", err)
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if s := f.h.Cache.Stats(); s.Runs != 2 {
		t.Fatalf("%d runs, want 2 (the first clone, and one for the four clients)", s.Runs)
	}

	// A run whose every client left stops and leaves nothing behind.
	if err := gittest.Git(f.repo, "update-ref", "refs/pull/2/head", "main"); err != nil {
		t.Fatal(err)
	}
	before := f.h.Cache.Stats()
	release2, reached := holdRuns(f.h)
	defer release2()
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /example.com/r.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nGit-Protocol: version=2\r\n"+
		"Content-Type: application/x-git-upload-pack-request\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "the lone client on its run", func() bool { return reached.Load() == 1 && f.h.Cache.Stats().Watching == 1 })
	conn.Close()
	waitFor(t, "the lone client to be gone", func() bool { return f.h.Cache.Stats().Watching == 0 })
	release2()
	waitFor(t, "the abandoned run to be dropped", func() bool {
		s := f.h.Cache.Stats()
		return s.Entries == before.Entries && s.Bytes == before.Bytes
	})
}

// postErr sends a request and reads the whole answer, saying whether it
// broke off.
func postErr(f *fixture, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, f.url+"/git-upload-pack", strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Git-Protocol", "version=2")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

func TestAFailedRunFailsItsFollowersAndIsNotKept(t *testing.T) {
	var failures atomic.Int64
	f := newFixture(t, cached(t, 1<<30, func(h *gitserve.Handler) {
		h.OnFailure = func(string, error) { failures.Add(1) }
	}))
	addBlobCommit(t, f.repo, "main", 1<<20, 1)
	if err := gittest.Git(f.repo, "repack", "-a", "-d", "-q"); err != nil {
		t.Fatal(err)
	}
	packs, err := filepath.Glob(filepath.Join(f.repo, "objects", "pack", "*.pack"))
	if err != nil || len(packs) != 1 {
		t.Fatalf("want one pack: %v %v", packs, err)
	}
	whole, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(packs[0], 0o644); err != nil {
		t.Fatal(err)
	}
	release, _ := holdRuns(f.h)
	defer release()
	body := v2Fetch("want "+head(t, f), "done")
	type answer struct {
		code int
		err  error
	}
	answers := make(chan answer, 3)
	for range 3 {
		go func() {
			code, err := postErr(f, body)
			answers <- answer{code, err}
		}()
	}
	waitFor(t, "three clients on one run", func() bool { return f.h.Cache.Stats().Watching == 3 })
	// The disk fails under the run: its pack loses its second half.
	if err := os.Truncate(packs[0], int64(len(whole)/2)); err != nil {
		t.Fatal(err)
	}
	release()
	for range 3 {
		if a := <-answers; a.code == http.StatusOK && a.err == nil {
			t.Error("a client of a failed run got a whole answer")
		}
	}
	if s := f.h.Cache.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("a failed run was kept: %+v", s)
	}
	if failures.Load() != 1 {
		t.Errorf("OnFailure heard %d failures, want 1 (one run)", failures.Load())
	}
	// Repaired, the same request runs again and succeeds.
	if err := os.WriteFile(packs[0], whole, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, err := postErr(f, body); code != http.StatusOK || err != nil {
		t.Fatalf("after the repair: %d %v", code, err)
	}
	if s := f.h.Cache.Stats(); s.Runs != 2 {
		t.Fatalf("%d runs, want 2: the failed one was not served again", s.Runs)
	}
}

func TestThePackCacheStaysWithinItsBound(t *testing.T) {
	const bound = 1 << 20
	dir := filepath.Join(t.TempDir(), "packcache")
	f := newFixture(t, func(h *gitserve.Handler) {
		c, err := gitserve.NewPackCache(dir, gitserve.CacheConfig{MaxBytes: bound, TTL: time.Hour}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.Cache = c
	})
	var over atomic.Int64 // the most the directory held, sampled
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := cacheFiles(t, dir); n > over.Load() {
				over.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	// Five branches of 300 KiB each: the oldest answers are evicted.
	for i := range 5 {
		b := fmt.Sprintf("b%d", i)
		addBlobCommit(t, f.repo, b, 300<<10, uint64(10+i))
		if _, err := cloneInto(t, f.url, "--single-branch", "--branch", b); err != nil {
			t.Fatal(err)
		}
	}
	if s := f.h.Cache.Stats(); s.Evicted == 0 || s.Bytes > bound {
		t.Fatalf("five 300 KiB answers in a 1 MiB cache: %+v, want evictions and at most %d bytes", s, bound)
	}
	// An answer larger than the whole bound spills: its three clients get
	// it whole from one run, and the directory never holds more.
	addBlobCommit(t, f.repo, "big", 3<<20, 99)
	release, _ := holdRuns(f.h)
	defer release()
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := cloneInto(t, f.url, "--single-branch", "--branch", "big")
			errs <- err
		}()
	}
	waitFor(t, "three clients on one run", func() bool { return f.h.Cache.Stats().Watching == 3 })
	release()
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	<-sampled
	s := f.h.Cache.Stats()
	if s.Spilled != 1 || s.Runs != 6 || s.Bytes > bound {
		t.Fatalf("a 3 MiB answer in a 1 MiB cache: %+v, want 1 spilled run of 6 and at most %d bytes", s, bound)
	}
	if over.Load() > bound {
		t.Fatalf("the cache's directory held %d bytes, over its bound of %d", over.Load(), bound)
	}
}

func TestRunsQueueForABoundedWaitThen503(t *testing.T) {
	for _, tc := range []struct {
		name            string
		global, perRepo int
	}{
		{"global", 1, 0},
		{"per repository", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
			f := newFixture(t, func(h *gitserve.Handler) {
				h.Clock = clk
				h.MaxUploadPacks, h.MaxPerRepo, h.QueueWait, h.QueueLength = tc.global, tc.perRepo, 10*time.Second, 1
				cached(t, 1<<30, nil)(h)
			})
			mainTip := head(t, f)
			devTip := revParse(t, f.repo, "dev")
			tagTip := revParse(t, f.repo, "v1")
			release, reached := holdRuns(f.h)
			defer release()
			type answer struct {
				code int
				hdr  http.Header
			}
			fetch := func(want string) chan answer {
				ch := make(chan answer, 1)
				go func() {
					code, hdr, _ := f.post(t, v2Fetch("want "+want, "done"), v2)
					ch <- answer{code, hdr}
				}()
				return ch
			}
			held := fetch(mainTip)
			waitFor(t, "the first run on its slot", func() bool { return reached.Load() == 1 })
			queued := fetch(devTip)
			waitFor(t, "the second run in the queue", func() bool { return f.h.Stats().Waiting == 1 })
			// The queue is full: at once 503.
			if code, hdr, body := f.post(t, v2Fetch("want "+tagTip, "done"), v2); code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
				t.Fatalf("beyond the queue's length: %d %q (Retry-After %q), want 503 with Retry-After", code, body, hdr.Get("Retry-After"))
			}
			clk.Advance(11 * time.Second)
			if a := <-queued; a.code != http.StatusServiceUnavailable || a.hdr.Get("Retry-After") == "" {
				t.Fatalf("after the bounded wait: %d (Retry-After %q), want 503 with Retry-After", a.code, a.hdr.Get("Retry-After"))
			}
			// A run that waits less gets the slot when it frees.
			queued = fetch(devTip)
			waitFor(t, "the third run in the queue", func() bool { return f.h.Stats().Waiting == 1 })
			release()
			for _, ch := range []chan answer{held, queued} {
				if a := <-ch; a.code != http.StatusOK {
					t.Fatalf("a run that got its slot: %d, want 200", a.code)
				}
			}
			if s := f.h.Stats(); s.Queued != 2 || s.TimedOut != 1 || s.Running != 0 {
				t.Fatalf("queue: %+v, want 2 queued, 1 timed out, none running", s)
			}
		})
	}
}

// Found by an end-to-end test: a blob fetched by its id (as a partial
// clone does) was kept as a pack, and after the upstream force-pushed it
// away and the mirror was pruned, the very same request was still
// answered from the kept pack. Every request is checked against the refs
// and the disk as they are now, kept pack or not: the blob is refused as
// soon as the force-push is in (its object still on disk), and after the
// prune.
func TestAKeptPackDoesNotServeWhatAForcePushTookAway(t *testing.T) {
	f := newFixture(t, cached(t, 1<<30, nil))
	before := revParse(t, f.repo, "refs/heads/main")
	secret := addBlobCommit(t, f.repo, "main", 4096, 9)
	blob := revParse(t, f.repo, secret+":blob-9")
	body := v2Fetch("want "+blob, "done")
	for range 2 { // the second is answered from the kept pack
		if code, _, resp := f.post(t, body, v2); code != http.StatusOK {
			t.Fatalf("the blob while main reaches it: %d %q", code, resp)
		}
	}
	if err := gittest.Git(f.repo, "update-ref", "refs/heads/main", before); err != nil {
		t.Fatal(err)
	}
	if _, err := gittest.Output(f.repo, "cat-file", "-e", blob); err != nil {
		t.Fatal("the force-push dropped the blob from disk: the test proves nothing")
	}
	if code, _, resp := f.post(t, body, v2); code != http.StatusForbidden || !strings.Contains(resp, "not our ref") {
		t.Fatalf("the blob that a force-push took away, before the prune: %d %q, want 403 not our ref", code, resp)
	}
	if err := gittest.Git(f.repo, "reflog", "expire", "--expire=now", "--all"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.repo, "repack", "-a", "-d", "-q"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.repo, "prune", "--expire=now"); err != nil {
		t.Fatal(err)
	}
	if _, err := gittest.Output(f.repo, "cat-file", "-e", blob); err == nil {
		t.Fatal("the prune left the blob: the test proves nothing")
	}
	if code, _, resp := f.post(t, body, v2); code == http.StatusOK {
		t.Fatalf("the pruned blob was served (%d %q)", code, resp)
	}
}

func TestAnAnswerWithBitRotIsNeitherKeptNorReplayed(t *testing.T) {
	var mu sync.Mutex
	var classes []gitcmd.Class
	f := newFixture(t, cached(t, 1<<30, func(h *gitserve.Handler) {
		h.OnFailure = func(_ string, err error) {
			mu.Lock()
			classes = append(classes, gitcmd.ClassOf(err))
			mu.Unlock()
		}
	}))
	addBlobCommit(t, f.repo, "main", 1<<16, 1)
	// Whole answers, of either protocol, are checked and kept.
	for _, v := range []string{"0", "2", "0", "2"} {
		if out, err := gittest.Output("", "-c", "protocol.version="+v, "clone", "-q", "--bare", f.url, filepath.Join(t.TempDir(), "c.git")); err != nil {
			t.Fatalf("clone (protocol v%s) of a whole mirror: %v: %s", v, err, out)
		}
	}
	if s := f.h.Cache.Stats(); s.Runs != 2 || s.Hits != 2 {
		t.Fatalf("two clones of each protocol: %+v, want 2 runs kept and 2 hits", s)
	}
	// A new commit, packed with the rest, then 64 bytes of the blob's
	// compressed data rot on disk.
	addBlobCommit(t, f.repo, "main", 1<<16, 2)
	if err := gittest.Git(f.repo, "repack", "-a", "-d", "-q"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gittest.RotPack(f.repo); err != nil {
		t.Fatal(err)
	}
	before := f.h.Cache.Stats()
	for _, v := range []string{"2", "2", "0"} {
		if _, err := gittest.Output("", "-c", "protocol.version="+v, "clone", "-q", "--bare", f.url, filepath.Join(t.TempDir(), "c.git")); err == nil {
			t.Fatalf("a clone (protocol v%s) of a mirror with bit rot in its pack succeeded", v)
		}
	}
	s := f.h.Cache.Stats()
	if s.Runs-before.Runs != 3 || s.Hits != before.Hits || s.Entries != before.Entries {
		t.Fatalf("three clones of a rotten mirror: %+v after %+v, want 3 new runs, none kept nor replayed", s, before)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(classes) != 3 || classes[0] != gitcmd.ClassBadObjects || classes[2] != gitcmd.ClassBadObjects {
		t.Fatalf("OnFailure heard %v, want three failures of class %q", classes, gitcmd.ClassBadObjects)
	}
}

// A kept answer leaves once unused for the TTL although no request comes
// (the cache's Run, on its clock): an idle node does not keep the files.
func TestAnIdleCacheExpiresItsFilesAfterTheTTL(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	f := newFixture(t, func(h *gitserve.Handler) {
		h.Clock = clk
		cached(t, 1<<30, nil)(h)
	})
	if _, err := cloneInto(t, f.url); err != nil {
		t.Fatal(err)
	}
	if s := f.h.Cache.Stats(); s.Entries != 1 || s.Bytes == 0 {
		t.Fatalf("after a clone: %+v, want one kept entry", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.h.Cache.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the expiry's ticker", func() bool { return clk.Timers() > 0 })
	start := clk.Now()
	// A tick the loop is not ready for is dropped: advance a little at
	// each look until the entry went.
	waitFor(t, "the kept entry to expire with no request", func() bool {
		s := f.h.Cache.Stats()
		if s.Entries == 0 && s.Expired == 1 && s.Bytes == 0 {
			return true
		}
		clk.Advance(10 * time.Second)
		return false
	})
	if waited := clk.Now().Sub(start); waited < 5*time.Minute {
		t.Errorf("expired after %v, before its TTL of 5 minutes", waited)
	}
}
