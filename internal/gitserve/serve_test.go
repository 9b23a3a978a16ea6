package gitserve_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// fixture is one upstream repository served by a Handler on 127.0.0.1.
type fixture struct {
	up   *gittest.Upstreams
	h    *gitserve.Handler
	srv  *httptest.Server
	repo string // the bare repository's directory
	url  string // its clone URL

	mu     sync.Mutex
	posts  [][]byte          // the upload-pack request bodies received, in order
	onPost func(body []byte) // when set, sees each recorded body before the Handler
}

func newFixture(t *testing.T, tune func(h *gitserve.Handler)) *fixture {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("r", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(up.Dir, "r.git")
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Resolve: func(key repokey.Key) (string, bool) {
		return repo, key == "example.com/r"
	}}
	if tune != nil {
		tune(h)
	}
	f := &fixture{up: up, h: h, repo: repo}
	f.srv = httptest.NewServer(f.record(h)) // listens on 127.0.0.1, held open
	t.Cleanup(f.srv.Close)
	f.url = f.srv.URL + "/example.com/r.git"
	return f
}

// record keeps the body of every upload-pack POST (small ones whole; a
// test replays what git sent).
func (f *fixture) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.ContentLength >= 0 && r.ContentLength < 1<<16 &&
			r.Header.Get("Content-Encoding") == "" {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			f.mu.Lock()
			f.posts = append(f.posts, b)
			onPost := f.onPost
			f.mu.Unlock()
			if onPost != nil {
				onPost(b)
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	})
}

func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// post sends an upload-pack request body as git would.
func (f *fixture) post(t *testing.T, body []byte, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+"/git-upload-pack", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

var v2 = map[string]string{"Git-Protocol": "version=2"}

func v2Fetch(args ...string) []byte {
	s := pkt("command=fetch\n") + pkt("agent=test\n") + "0001"
	for _, a := range args {
		s += pkt(a + "\n")
	}
	return []byte(s + "0000")
}

func head(t *testing.T, f *fixture) string {
	out, err := gittest.Output(f.repo, "rev-parse", "main")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func git(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	return gittest.Output(dir, args...)
}

func TestCloneAndFetchStillWorkWithProtocolV2AndV0(t *testing.T) {
	f := newFixture(t, func(h *gitserve.Handler) { h.MaxUploadPacks, h.MaxPerClient = 4, 2 })
	for _, proto := range []string{"2", "0"} {
		dir := filepath.Join(t.TempDir(), "c")
		if _, err := git(t, "", "-c", "protocol.version="+proto, "clone", "-q", f.url, dir); err != nil {
			t.Fatalf("v%s clone: %v", proto, err)
		}
		newID, err := f.up.Commit("r", "main")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := git(t, dir, "-c", "protocol.version="+proto, "fetch", "-q", "origin"); err != nil {
			t.Fatalf("v%s fetch: %v", proto, err)
		}
		if got, _ := git(t, dir, "rev-parse", "origin/main"); strings.TrimSpace(got) != newID {
			t.Fatalf("v%s fetch: origin/main is %q, want %s", proto, got, newID)
		}
	}
}

func TestPartialCloneWithBlobNoneFetchesItsBlobsLazily(t *testing.T) {
	f := newFixture(t, nil)
	dir := filepath.Join(t.TempDir(), "c")
	// The checkout asks for the blobs of main by id: trees and blobs are served.
	if _, err := git(t, "", "-c", "protocol.version=2", "clone", "-q", "--filter=blob:none", f.url, dir); err != nil {
		t.Fatalf("partial clone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "file.txt")); err != nil {
		t.Fatalf("checkout of a partial clone: %v", err)
	}
}

func TestExpensiveFiltersAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	want := "want " + head(t, f)
	for _, filter := range []string{"sparse:oid=main:file.txt", "tree:3", "combine:blob:none+tree:0", "object:type=blob"} {
		if code, _, body := f.post(t, v2Fetch(want, "filter "+filter, "done"), v2); code != http.StatusForbidden {
			t.Errorf("filter %s: got %d %q, want 403", filter, code, body)
		}
	}
	if _, err := git(t, "", "-c", "protocol.version=2", "clone", "-q", "--filter=sparse:oid=main:file.txt", f.url, filepath.Join(t.TempDir(), "c")); err == nil {
		t.Error("a clone with --filter=sparse:oid= succeeded")
	}
	for _, filter := range []string{"blob:none", "blob:limit=1k", "tree:0"} {
		if code, _, body := f.post(t, v2Fetch(want, "filter "+filter, "done"), v2); code != http.StatusOK {
			t.Errorf("filter %s: got %d %q, want 200", filter, code, body)
		}
	}
}

func TestUnneededV2CommandsAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	for _, cmd := range []string{"object-info", "bundle-uri", "no-such-command"} {
		body := []byte(pkt("command="+cmd+"\n") + "0001" + pkt("size\n") + pkt("oid "+head(t, f)+"\n") + "0000")
		if code, _, resp := f.post(t, body, v2); code != http.StatusForbidden {
			t.Errorf("command %s: got %d %q, want 403", cmd, code, resp)
		}
	}
	ls := []byte(pkt("command=ls-refs\n") + "0001" + pkt("peel\n") + pkt("ref-prefix refs/heads/\n") + "0000")
	if code, _, resp := f.post(t, ls, v2); code != http.StatusOK || !strings.Contains(resp, "refs/heads/main") {
		t.Errorf("ls-refs: got %d %q", code, resp)
	}
}

func TestACommitForcePushedAwayCannotBeFetchedByID(t *testing.T) {
	f := newFixture(t, nil)
	before := head(t, f)
	secret, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.repo, "update-ref", "refs/heads/main", before); err != nil {
		t.Fatal(err)
	}
	if code, _, body := f.post(t, v2Fetch("want "+secret, "done"), v2); code != http.StatusForbidden {
		t.Fatalf("want of a force-pushed-away commit: got %d %q, want 403", code, body)
	}
	dir := filepath.Join(t.TempDir(), "c")
	if _, err := git(t, "", "init", "-q", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := git(t, dir, "-c", "protocol.version=2", "fetch", "-q", f.url, secret); err == nil {
		t.Fatal("git fetch of a force-pushed-away commit by id succeeded")
	}
	// An ancestor of a served ref is served.
	if code, _, body := f.post(t, v2Fetch("want "+before+"", "done"), v2); code != http.StatusOK {
		t.Fatalf("want of a reachable commit: got %d %q", code, body)
	}
	if _, err := git(t, dir, "-c", "protocol.version=2", "fetch", "-q", f.url, before); err != nil {
		t.Fatalf("git fetch of a reachable commit by id: %v", err)
	}
}

func TestMalformedRequestsGet4xxNever500(t *testing.T) {
	f := newFixture(t, func(h *gitserve.Handler) { h.MaxRequest = 1 << 20 })
	full := v2Fetch("want "+head(t, f), "done")
	var bomb bytes.Buffer
	gz := gzip.NewWriter(&bomb)
	zeros := make([]byte, 1<<20)
	for range 64 { // 64 MiB of zeros in about 64 KiB
		_, _ = gz.Write(zeros)
	}
	_ = gz.Close()
	for _, tc := range []struct {
		name string
		body []byte
		hdr  map[string]string
		want int
	}{
		{"gzip bomb", bomb.Bytes(), map[string]string{"Git-Protocol": "version=2", "Content-Encoding": "gzip"}, http.StatusRequestEntityTooLarge},
		{"bad gzip", []byte("not gzip at all"), map[string]string{"Content-Encoding": "gzip"}, http.StatusBadRequest},
		{"truncated pkt-line", full[:len(full)-9], v2, http.StatusBadRequest},
		{"truncated before the flush", full[:len(full)-4], v2, http.StatusBadRequest},
		{"bad pkt-line length", []byte("zzzzcommand=fetch"), v2, http.StatusBadRequest},
		{"empty", nil, v2, http.StatusBadRequest},
		{"want without an id", v2Fetch("want nothing", "done"), v2, http.StatusBadRequest},
		{"unknown v2 argument", v2Fetch("want "+head(t, f), "frobnicate"), v2, http.StatusForbidden},
		{"v0 truncated", []byte(pkt("want " + head(t, f) + " ofs-delta\n")), nil, http.StatusBadRequest},
		{"v0 unknown object", []byte(pkt("want "+strings.Repeat("ab", 20)+"\n") + "0000" + pkt("done\n")), nil, http.StatusForbidden},
		{"too large", bytes.Repeat([]byte(pkt("have "+head(t, f)+"\n")), 30000), v2, http.StatusRequestEntityTooLarge},
		{"junk Git-Protocol", full, map[string]string{"Git-Protocol": "version=2;rm -rf /"}, http.StatusBadRequest},
		{"long Git-Protocol", full, map[string]string{"Git-Protocol": "version=2:" + strings.Repeat("a", 500)}, http.StatusBadRequest},
	} {
		if code, _, body := f.post(t, tc.body, tc.hdr); code != tc.want {
			t.Errorf("%s: got %d %q, want %d", tc.name, code, body, tc.want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, f.url+"/info/refs?service=git-upload-pack", nil)
	req.Header.Set("Git-Protocol", "version=3")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("info/refs with Git-Protocol version=3: got %d, want 400", resp.StatusCode)
	}
}

// slowClient opens a POST that announces a body and then trickles it, one
// byte at a time, until stop is closed. It returns the connection, whose
// answer the caller reads.
func slowClient(t *testing.T, f *fixture, stop <-chan struct{}) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /example.com/r.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nGit-Protocol: version=2\r\n"+
		"Content-Type: application/x-git-upload-pack-request\r\nContent-Length: 100000\r\n\r\n")
	go gittest.TrickleBody(conn, 50*time.Millisecond, stop)
	return conn
}

func status(t *testing.T, conn net.Conn) (int, http.Header) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// uploadPacks counts the running git upload-pack processes of dir.
func uploadPacks(t *testing.T, dir string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc: cannot count processes here")
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte("upload-pack")) && bytes.Contains(b, []byte(dir)) {
			n++
		}
	}
	return n
}

func TestSlowClientsHoldNoUploadPackAndGet408(t *testing.T) {
	f := newFixture(t, func(h *gitserve.Handler) { h.ReadTimeout = time.Second })
	stop := make(chan struct{})
	defer close(stop)
	var conns []net.Conn
	for range 8 {
		conns = append(conns, slowClient(t, f, stop))
	}
	// While they trickle, no upload-pack runs for them.
	for range 5 {
		if n := uploadPacks(t, f.repo); n != 0 {
			t.Fatalf("%d upload-pack processes run for clients still sending their bodies", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, c := range conns {
		if code, _ := status(t, c); code != http.StatusRequestTimeout {
			t.Errorf("slow client %d: got %d, want 408", i, code)
		}
	}
}

// A damaged mirror is a failure the node must hear of (to verify and
// repair it), not a client's want to refuse: served alone, the client
// gets 500, not git's "not our ref" (which the run's answer begins with,
// held until the run ends), and through the pack cache likewise.
func TestAWantOfADamagedMirrorsTipIsAFailureNotARefusal(t *testing.T) {
	truncatePacks := func(t *testing.T, f *fixture) string {
		tip := head(t, f)
		if _, err := git(t, f.repo, "repack", "-a", "-d", "-q"); err != nil {
			t.Fatal(err)
		}
		packs, err := filepath.Glob(filepath.Join(f.repo, "objects", "pack", "*.pack"))
		if err != nil || len(packs) == 0 {
			t.Fatalf("no pack to damage: %v", err)
		}
		for _, p := range packs {
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}
		return tip
	}
	// git says only "not our ref" of a loose object that is gone.
	removeLooseTip := func(t *testing.T, f *fixture) string {
		tip, err := f.up.Commit("r", "main")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(f.repo, "objects", tip[:2], tip[2:])); err != nil {
			t.Fatal(err)
		}
		return tip
	}
	for _, tc := range []struct {
		name   string
		cache  bool
		damage func(t *testing.T, f *fixture) string
	}{
		{"a truncated pack, alone", false, truncatePacks},
		{"a truncated pack, through the pack cache", true, truncatePacks},
		{"a loose tip gone, alone", false, removeLooseTip},
		{"a loose tip gone, through the pack cache", true, removeLooseTip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var failed []error
			f := newFixture(t, func(h *gitserve.Handler) {
				h.OnFailure = func(key string, err error) {
					mu.Lock()
					defer mu.Unlock()
					failed = append(failed, err)
				}
				if tc.cache {
					cached(t, 1<<30, nil)(h)
				}
			})
			tip := tc.damage(t, f)
			code, _, body := f.post(t, v2Fetch("want "+tip, "done"), v2)
			if code != http.StatusInternalServerError || strings.Contains(body, "not our ref") {
				t.Fatalf("want of a damaged mirror's tip: %d %q, want 500", code, body)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(failed) != 1 || gitcmd.ClassOf(failed[0]) != gitcmd.ClassBadObjects {
				t.Fatalf("OnFailure heard %v, want one failure of class %q", failed, gitcmd.ClassBadObjects)
			}
		})
	}
}

// A request waits its turn only once its body is read, so a client that
// trickles a body holds none of its share: its other requests are served
// at once meanwhile (none waits), and the trickler gets 408 at its read
// deadline (the per-client share and its queue are
// TestARequestOverItsClientsShareWaitsItsTurnThenIsServed and the tests
// beside it).
func TestATricklingBodyHoldsNoShareOfItsClient(t *testing.T) {
	f := newFixture(t, func(h *gitserve.Handler) {
		h.MaxUploadPacks, h.MaxPerClient, h.QueueWait, h.ReadTimeout = 10, 1, time.Minute, 2*time.Second
	})
	stop := make(chan struct{})
	defer close(stop)
	trickler := slowClient(t, f, stop)
	end := make(chan int, 1)
	go func() {
		_ = trickler.SetReadDeadline(time.Now().Add(2 * time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(trickler), nil)
		if err != nil {
			end <- 0
			return
		}
		resp.Body.Close()
		end <- resp.StatusCode
	}()
	served := 0
	for {
		select {
		case code := <-end:
			if code != http.StatusRequestTimeout {
				t.Fatalf("the trickling request: got %d, want 408", code)
			}
			if served == 0 {
				t.Fatal("no request was made while the body trickled: nothing shown")
			}
			if c := f.h.Stats().Clients; c.Queued != 0 || c.Refused != 0 {
				t.Fatalf("clients' queue: %+v: a request waited behind the trickling body", c)
			}
			return
		default:
		}
		if code, _, body := f.post(t, v2Fetch("want "+head(t, f), "done"), v2); code != http.StatusOK {
			t.Fatalf("a fetch of the trickler's address while it trickles: %d %q, want 200", code, body)
		}
		served++
	}
}

// A client that reads protocol v2's capabilities is not told of commands
// that would be refused (git 2.39 advertises object-info whatever
// transfer.advertiseObjectInfo says).
func TestRefusedV2CommandsAreNotAdvertised(t *testing.T) {
	f := newFixture(t, nil)
	req, err := http.NewRequest(http.MethodGet, f.url+"/info/refs?service=git-upload-pack", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Git-Protocol", "version=2")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	caps := string(b)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(caps, pkt("version 2\n")) || !strings.HasSuffix(caps, "0000") {
		t.Fatalf("v2 capability advertisement: %d %q", resp.StatusCode, caps)
	}
	for _, c := range []string{"ls-refs", "fetch=", "object-format=sha1"} {
		if !strings.Contains(caps, c) {
			t.Errorf("advertisement lacks %s: %q", c, caps)
		}
	}
	if strings.Contains(caps, "object-info") || strings.Contains(caps, "bundle-uri") {
		t.Errorf("advertisement offers a refused command: %q", caps)
	}
	// What git itself reads from it.
	cmd := exec.Command("git", "-c", "protocol.version=2", "ls-remote", f.url)
	cmd.Env = append(gittest.Env(), "GIT_TRACE_PACKET=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "refs/heads/main") {
		t.Fatalf("git ls-remote: %v %q %s", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "git< ls-refs") {
		t.Fatalf("git ls-remote did not speak protocol v2: %s", stderr.String())
	}
	if strings.Contains(stderr.String(), "object-info") {
		t.Errorf("git ls-remote was offered object-info: %s", stderr.String())
	}
}

// bigBranch commits a file of size random bytes to refs/heads/big of repo
// and returns the commit: a pack of it fills any socket's buffers.
func bigBranch(t *testing.T, repo string, size int) string {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	run := func(stdin []byte, args ...string) string {
		cmd := exec.Command("git", append([]string{"--git-dir=" + repo}, args...)...)
		cmd.Env = gittest.Env()
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	blob := run(data, "hash-object", "-w", "--stdin")
	tree := run([]byte("100644 blob "+blob+"\tbig.bin\n"), "mktree")
	commit := run(nil, "commit-tree", "-m", "big", tree)
	run(nil, "update-ref", "refs/heads/big", commit)
	return commit
}

// A client that asks for a pack and stops reading it does not hold an
// upload-pack for the run's whole timeout: the run stops once a write to
// it made no progress for IdleTimeout (git's --timeout in v0, the write
// deadline in v2).
func TestAStalledClientDoesNotHoldAnUploadPack(t *testing.T) {
	f := newFixture(t, func(h *gitserve.Handler) { h.IdleTimeout = time.Second })
	big := bigBranch(t, f.repo, 12<<20)
	for _, tc := range []struct {
		proto string
		body  string
		hdr   string
	}{
		{"v2", string(v2Fetch("want "+big, "ofs-delta", "no-progress", "done")), "Git-Protocol: version=2\r\n"},
		{"v0", pkt("want "+big+" side-band-64k ofs-delta no-progress\n") + "0000" + pkt("done\n"), ""},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.(*net.TCPConn).SetReadBuffer(16 << 10) // a small window: the server's writes block soon
			fmt.Fprintf(conn, "POST /example.com/r.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n%s"+
				"Content-Type: application/x-git-upload-pack-request\r\nContent-Length: %d\r\n\r\n%s", tc.hdr, len(tc.body), tc.body)
			// The answer starts; then the client reads no more.
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("answer: %v %v", resp, err)
			}
			if uploadPacks(t, f.repo) == 0 {
				t.Fatal("no upload-pack runs for the stalled client: nothing to show")
			}
			deadline := time.Now().Add(time.Minute) // the run's own timeout is 30 minutes
			for uploadPacks(t, f.repo) > 0 {
				if time.Now().After(deadline) {
					t.Fatal("the upload-pack of a client that stopped reading still runs after a minute")
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
