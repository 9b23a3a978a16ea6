package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// A CI farm, a classroom or an office clones from behind one address. With
// the default serving flags, 32 clones at once from 127.0.0.1 all succeed,
// each with the upstream's HEAD; the requests over the address's share wait
// their turn rather than get 429. Then, with the address's share held by
// fetches that stopped reading, one more clone waits in the queue and is
// served once they hang up.
func TestThirtyTwoConcurrentClonesFromOneAddressAllSucceed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	const small, big = 0, 1
	bigTip := queueRepos(t, f, small, big)
	f.startUp() // the serving flags at their defaults
	eventually(t, 90*time.Second, "both repositories served", func() error { return f.servedLikeUpstream([]int{small, big}) })

	url := f.base + "/" + f.key(small) + ".git"
	head := upstreamHead(t, f, small)
	const n = 32
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- cloneHead(t, url, head, fmt.Sprintf("clone %d", i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	fams, err := scrape(f.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, outcome := range []string{"timed-out", "bumped"} {
		if v, _ := sample(fams, "gitfleet_serve_client_queued_total", "outcome", outcome); v != 0 {
			t.Errorf("%v requests of the 32 clones %s in their client's queue, want none", v, outcome)
		}
	}
	if v, _ := sample(fams, "gitfleet_serve_client_refused_total"); v != 0 {
		t.Errorf("%v requests of the 32 clones refused at once, want none", v)
	}
	waited, _ := sample(fams, "gitfleet_serve_client_queued_total", "outcome", "served")
	t.Logf("32 clones from one address: %v requests waited their turn, none refused", waited)

	// Over its share, a clone is queued, not refused.
	holders := holdShares(t, f, big, bigTip)
	queued := make(chan error, 1)
	go func() { queued <- cloneHead(t, url, head, "the clone over the share") }()
	eventually(t, time.Minute, "the clone over its address's share waiting its turn", func() error {
		return clientQueue(f, 1)
	})
	for _, c := range holders {
		c.Close()
	}
	if err := <-queued; err != nil {
		t.Fatal(err)
	}
	fams, err = scrape(f.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := sample(fams, "gitfleet_serve_client_queued_total", "outcome", "served"); v <= waited {
		t.Fatalf("%v requests served after waiting their turn, want more than the %v before the held share", v, waited)
	}
}

// Past the bounded wait (--serve-queue-wait), a request over its address's
// share gets 429 with Retry-After.
func TestARequestOverItsAddressShareGets429PastTheBoundedWait(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	const small, big = 0, 1
	bigTip := queueRepos(t, f, small, big)
	f.startUp("--serve-queue-wait", "2s")
	eventually(t, 90*time.Second, "both repositories served", func() error { return f.servedLikeUpstream([]int{small, big}) })
	holders := holdShares(t, f, big, bigTip)
	resp, err := http.Get(f.base + "/" + f.key(small) + ".git/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a request over its address's share past the wait: %d (Retry-After %q), want 429 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	fams, err := scrape(f.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := sample(fams, "gitfleet_serve_client_queued_total", "outcome", "timed-out"); v != 1 {
		t.Fatalf("%v requests timed out in their client's queue, want 1", v)
	}
	for _, c := range holders {
		c.Close()
	}
	// The share comes back.
	eventually(t, time.Minute, "the address served again", func() error { return f.servedLikeUpstream([]int{small}) })
}

// queueRepos makes a small upstream and a big one (a 16 MiB blob on main:
// a fetch of it fills any socket's buffers), catalogs them, and returns
// the big one's tip.
func queueRepos(t *testing.T, f *fleet, small, big int) string {
	t.Helper()
	for _, i := range []int{small, big} {
		if err := f.up.Create(f.name(i), []string{"main", "dev"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	tip, err := f.up.AddBlob(f.name(big), "main", 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.writeCatalog([]int{small, big}, "a small and a big repository")
	return tip
}

func upstreamHead(t *testing.T, f *fleet, i int) string {
	t.Helper()
	refs, err := f.up.Refs(f.name(i))
	if err != nil {
		t.Fatal(err)
	}
	return refs["refs/heads/main"]
}

// cloneHead clones url (git's default protocol) and checks its HEAD.
func cloneHead(t *testing.T, url, head, what string) error {
	dir := filepath.Join(t.TempDir(), "clone")
	cmd := exec.Command("git", "clone", "-q", "--", url, dir)
	cmd.Env = gittest.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: git clone: %w: %s", what, err, stderr.String())
	}
	got, err := gittest.Output(dir, "rev-parse", "HEAD")
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if got = strings.TrimSpace(got); got != head {
		return fmt.Errorf("%s: HEAD %s, want %s", what, got, head)
	}
	return nil
}

// holdShares takes the whole share of 127.0.0.1 (the default
// --serve-max-per-client) with fetches of the big repository that read
// their answers' headers and then no more: each stays in service, its
// writes blocked, until the test hangs it up (or the server cuts it off
// after a minute). It returns their connections.
func holdShares(t *testing.T, f *fleet, big int, tip string) []net.Conn {
	t.Helper()
	body := pktLine("command=fetch\n") + pktLine("agent=e2e\n") + "0001" + pktLine("want "+tip+"\n") +
		pktLine("ofs-delta\n") + pktLine("no-progress\n") + pktLine("done\n") + "0000"
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) // a small window
		})
		if err != nil {
			return err
		}
		return serr
	}}
	var conns []net.Conn
	for range config.Default().ServeMaxPerClient {
		conn, err := d.Dial("tcp", f.http)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /%s.git/git-upload-pack HTTP/1.1\r\nHost: %s\r\nGit-Protocol: version=2\r\n"+
			"Content-Type: application/x-git-upload-pack-request\r\nContent-Length: %d\r\n\r\n%s",
			f.key(big), f.http, len(body), body)
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("a fetch holding a share: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a fetch holding a share: %s", resp.Status)
		}
		conns = append(conns, conn)
	}
	return conns
}

func pktLine(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// clientQueue checks that n requests wait their client's turn.
func clientQueue(f *fleet, n int) error {
	fams, err := scrape(f.base + "/metrics")
	if err != nil {
		return err
	}
	if v, _ := sample(fams, "gitfleet_serve_client_queue"); v != float64(n) {
		return fmt.Errorf("%v requests wait their client's turn, want %d", v, n)
	}
	return nil
}
