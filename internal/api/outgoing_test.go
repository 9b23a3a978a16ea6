package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
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
	e := newTestEnv(t, Config{OutgoingHooks: []string{target.URL}, OutgoingSecret: secret}, newFakeBackend())
	recv.clk = e.clk
	return e, recv
}

func TestOutgoingWebhookRetriesWithBackoffUntilDelivered(t *testing.T) {
	e, recv := newHookEnv(t, 2, "out-secret")
	e.events.Publish(refEvent("github.com/a/b", "refs/heads/main"), refEvent("github.com/a/b", "refs/tags/v1"))
	eventually(t, e.clk, 100*time.Millisecond, func() bool { return recv.attempts() >= 3 })
	eventually(t, e.clk, time.Minute, func() bool { return true }) // a while longer: no fourth attempt
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
