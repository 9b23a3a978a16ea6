package api

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/egress"
)

// hookReceiver is an outgoing webhook's target that fails its first
// deliveries.
type hookReceiver struct {
	clk   clock.Clock
	fail  int
	mu    sync.Mutex
	times []time.Time // clock time of each attempt
	last  []byte
	sig   string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.times = append(h.times, h.clk.Now())
	h.last, h.sig = body, r.Header.Get(SignatureHeader)
	if len(h.times) <= h.fail {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}
}

func (h *hookReceiver) attempts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.times)
}

func newHookEnv(t *testing.T, fail int, secret string) (*testEnv, *hookReceiver) {
	t.Helper()
	recv := &hookReceiver{fail: fail}
	target := httptest.NewServer(recv)
	t.Cleanup(target.Close)
	e := newTestEnv(t, Config{OutgoingHooks: []string{target.URL}, OutgoingSecret: secret, Egress: loopbackOnly(t)}, newFakeBackend())
	recv.clk = e.clk
	return e, recv
}

func TestOutgoingWebhookRetriesWithBackoffUntilDelivered(t *testing.T) {
	e, recv := newHookEnv(t, 2, "out-secret")
	e.events.Publish(refEvent("github.com/a/b", "refs/heads/main"), refEvent("github.com/a/b", "refs/tags/v1"))
	eventually(t, e.clk, 100*time.Millisecond, func() bool { return recv.attempts() >= 3 })
	// Delivered, the batch is not sent again: no fourth attempt.
	eventually(t, e.clk, time.Minute, func() bool { return strings.Contains(e.logs.String(), "outgoing webhook: delivered") })
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.times) != 3 {
		t.Fatalf("%d attempts, want 3 (two failures, then delivered)", len(recv.times))
	}
	if first, second := recv.times[1].Sub(recv.times[0]), recv.times[2].Sub(recv.times[1]); first < hookBackoff || second < 2*hookBackoff {
		t.Errorf("waits %v then %v, want at least %v then %v", first, second, hookBackoff, 2*hookBackoff)
	}
	var body outgoingBody
	if err := json.Unmarshal(recv.last, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Events) != 2 || body.Events[0].ID != 1 || body.Events[1].Ref != "refs/tags/v1" {
		t.Errorf("delivered %s", recv.last)
	}
	if recv.sig != Sign("out-secret", recv.last) {
		t.Errorf("signature %q does not match the body", recv.sig)
	}
}

func TestOutgoingWebhookGivesUpAfterBoundedAttempts(t *testing.T) {
	e, recv := newHookEnv(t, 1000, "")
	e.events.Publish(refEvent("github.com/a/b", "refs/heads/main"))
	eventually(t, e.clk, time.Second, func() bool { return strings.Contains(e.logs.String(), "giving up") })
	for range 10 {
		e.clk.Advance(hookMaxBackoff)
	}
	if n := recv.attempts(); n != hookAttempts {
		t.Errorf("%d attempts, want %d", n, hookAttempts)
	}
	if recv.sig != "" {
		t.Errorf("signed without a secret: %q", recv.sig)
	}
}

// loopbackOnly is an egress dialer that allows 127.0.0.1 only (standing for
// the internet) and refuses the rest of the loopback range.
func loopbackOnly(t *testing.T) *egress.Dialer {
	t.Helper()
	p, err := egress.New(egress.Config{Allow: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	return &egress.Dialer{Policy: p}
}

// countingListener counts the connections made to an address.
func countingListener(t *testing.T, addr string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s here: %v", addr, err)
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), &n
}

func TestOutgoingWebhookDoesNotFollowRedirects(t *testing.T) {
	inside, insideConns := countingListener(t, "127.0.0.2:0")
	other := &hookReceiver{}
	allowed := httptest.NewServer(other)
	defer allowed.Close()
	var hits atomic.Int64
	for _, to := range []string{"http://" + inside + "/hook", allowed.URL + "/hook"} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
		}))
		defer redirector.Close()
		e := newTestEnv(t, Config{OutgoingHooks: []string{redirector.URL}, Egress: loopbackOnly(t)}, newFakeBackend())
		other.clk = e.clk
		before := hits.Load()
		e.events.Publish(refEvent("github.com/a/b", "refs/heads/main"))
		eventually(t, e.clk, 100*time.Millisecond, func() bool { return hits.Load() > before })
	}
	if n := insideConns.Load(); n != 0 {
		t.Errorf("the redirect to loopback 127.0.0.2 was followed: %d connections", n)
	}
	if n := other.attempts(); n != 0 {
		t.Errorf("the redirect to another allowed server was followed: %d deliveries", n)
	}
}

func TestOutgoingWebhookToBlockedDestinationIsDroppedWithoutConnecting(t *testing.T) {
	inside, conns := countingListener(t, "127.0.0.2:0")
	e := newTestEnv(t, Config{OutgoingHooks: []string{"http://" + inside + "/hook"}, Egress: loopbackOnly(t)}, newFakeBackend())
	e.events.Publish(refEvent("github.com/a/b", "refs/heads/main"))
	eventually(t, e.clk, 100*time.Millisecond, func() bool {
		return strings.Contains(e.logs.String(), "destination refused")
	})
	if !strings.Contains(e.logs.String(), "blocked destination") {
		t.Errorf("log does not say blocked destination:\n%s", e.logs.String())
	}
	if strings.Contains(e.logs.String(), "will retry") {
		t.Errorf("a refused destination was retried:\n%s", e.logs.String())
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the refused destination got %d connections", n)
	}
}
