package gitserve_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitserve"
)

// answer is the end of a request sent in the background.
type answer struct {
	code int
	hdr  http.Header
	err  error
}

// send posts body to the fixture with client in the background.
func send(f *fixture, client *http.Client, body []byte) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, f.url+"/git-upload-pack", bytes.NewReader(body))
		if err != nil {
			ch <- answer{err: err}
			return
		}
		req.Header.Set("Git-Protocol", "version=2")
		resp, err := client.Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		ch <- answer{code: resp.StatusCode, hdr: resp.Header, err: err}
	}()
	return ch
}

func want(t *testing.T, what string, ch <-chan answer, code int) answer {
	t.Helper()
	a := <-ch
	if a.err != nil || a.code != code {
		t.Fatalf("%s: %d %v, want %d", what, a.code, a.err, code)
	}
	return a
}

// oneShare is a fixture whose clients have a share of one request, and
// whose fetches run only once the returned release is called: the test
// holds its client's share with a fetch of its own.
func oneShare(t *testing.T, tune func(h *gitserve.Handler)) (f *fixture, clk *clock.Fake, release func()) {
	clk = clock.NewFake(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	f = newFixture(t, func(h *gitserve.Handler) {
		h.Clock = clk
		h.MaxPerClient, h.QueueWait, h.QueueLength = 1, time.Minute, 16
		cached(t, 1<<30, tune)(h)
	})
	gate, reached := holdRuns(f.h)
	t.Cleanup(gate)
	return f, clk, func() {
		t.Helper()
		waitFor(t, "a fetch holding the share on its run", func() bool { return reached.Load() == 1 })
		gate()
	}
}

func TestARequestOverItsClientsShareWaitsItsTurnThenIsServed(t *testing.T) {
	f, _, release := oneShare(t, nil)
	held := send(f, f.srv.Client(), v2Fetch("want "+head(t, f), "done"))
	waitFor(t, "the first fetch in service", func() bool { return f.h.Cache.Stats().Watching == 1 })
	queued := send(f, f.srv.Client(), v2Fetch("want "+revParse(t, f.repo, "dev"), "done"))
	waitFor(t, "the second fetch waiting its turn", func() bool { return f.h.Stats().Clients.Waiting == 1 })
	release()
	want(t, "the fetch that held the share", held, http.StatusOK)
	want(t, "the fetch that waited its turn", queued, http.StatusOK)
	if c := f.h.Stats().Clients; c.Queued != 1 || c.Served != 1 || c.TimedOut != 0 || c.Waiting != 0 {
		t.Fatalf("clients' queue: %+v, want one queued and served", c)
	}
}

func TestPastTheBoundedWaitARequestOverItsShareGets429WithRetryAfter(t *testing.T) {
	f, clk, release := oneShare(t, nil)
	held := send(f, f.srv.Client(), v2Fetch("want "+head(t, f), "done"))
	waitFor(t, "the first fetch in service", func() bool { return f.h.Cache.Stats().Watching == 1 })
	queued := send(f, f.srv.Client(), v2Fetch("want "+revParse(t, f.repo, "dev"), "done"))
	waitFor(t, "the second fetch waiting its turn", func() bool { return f.h.Stats().Clients.Waiting == 1 })
	clk.Advance(time.Minute)
	if a := want(t, "past the bounded wait", queued, http.StatusTooManyRequests); a.hdr.Get("Retry-After") == "" {
		t.Fatal("a 429 past the bounded wait without Retry-After")
	}
	release()
	want(t, "the fetch that held the share", held, http.StatusOK)
	// The share is back: the next request is served at once.
	want(t, "a fetch after the share came back", send(f, f.srv.Client(), v2Fetch("want "+head(t, f), "done")), http.StatusOK)
	if c := f.h.Stats().Clients; c.Queued != 1 || c.TimedOut != 1 || c.Served != 0 {
		t.Fatalf("clients' queue: %+v, want one queued, timed out", c)
	}
}

// A waiting request whose client hung up leaves the queue at once, not at
// its turn or the end of its wait: for a ref listing (no body) and for a
// fetch (whose body is read before it waits).
func TestARequestWhoseClientHangsUpWhileWaitingLeavesTheQueueAtOnce(t *testing.T) {
	f, _, release := oneShare(t, nil)
	held := send(f, f.srv.Client(), v2Fetch("want "+head(t, f), "done"))
	waitFor(t, "the first fetch in service", func() bool { return f.h.Cache.Stats().Watching == 1 })
	fetch := v2Fetch("want "+revParse(t, f.repo, "dev"), "done")
	for i, raw := range []string{
		"GET /example.com/r.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\nGit-Protocol: version=2\r\n\r\n",
		fmt.Sprintf("POST /example.com/r.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nGit-Protocol: version=2\r\n"+
			"Content-Type: application/x-git-upload-pack-request\r\nContent-Length: %d\r\n\r\n%s", len(fetch), fetch),
	} {
		conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, raw); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the request waiting its turn", func() bool { return f.h.Stats().Clients.Waiting == 1 })
		conn.Close()
		waitFor(t, "the request gone from the queue", func() bool {
			c := f.h.Stats().Clients
			return c.Waiting == 0 && c.Left == int64(i+1)
		})
	}
	release()
	want(t, "the fetch that held the share", held, http.StatusOK)
}

// One address's waiting requests do not hold up another address's.
func TestAnotherAddressIsServedWhileOneWaitsItsTurn(t *testing.T) {
	f, _, release := oneShare(t, nil)
	held := send(f, f.srv.Client(), v2Fetch("want "+head(t, f), "done"))
	waitFor(t, "the first fetch in service", func() bool { return f.h.Cache.Stats().Watching == 1 })
	queued := send(f, f.srv.Client(), v2Fetch("want "+revParse(t, f.repo, "dev"), "done"))
	waitFor(t, "the second fetch waiting its turn", func() bool { return f.h.Stats().Clients.Waiting == 1 })
	other := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		return d.DialContext(ctx, network, addr)
	}}}
	defer other.CloseIdleConnections()
	// A ref listing: it runs upload-pack of its own, which the held runs
	// of the pack cache do not gate.
	lsRefs := []byte(pkt("command=ls-refs\n") + "0001" + pkt("ref-prefix refs/heads/\n") + "0000")
	want(t, "another address's ref listing while the first waits", send(f, other, lsRefs), http.StatusOK)
	if c := f.h.Stats().Clients; c.Waiting != 1 {
		t.Fatalf("clients' queue: %+v, want the first address's fetch still waiting", c)
	}
	release()
	want(t, "the fetch that held the share", held, http.StatusOK)
	want(t, "the fetch that waited its turn", queued, http.StatusOK)
}
