package api

import (
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

func TestAReplayedDeliveryIsActedOnOnce(t *testing.T) {
	body := map[string][]byte{
		"github": []byte(`{"repository": {"clone_url": "https://github.com/a/b.git"}}`),
		"gitlab": []byte(`{"project": {"git_http_url": "https://gitlab.com/a/b.git"}}`),
		"gitee":  []byte(`{"repository": {"clone_url": "https://gitee.com/a/b.git"}}`),
	}
	id := map[string][]string{
		"github": {"X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		"gitlab": {"Idempotency-Key: 3d5a4b2c-0000-4a1e-9f00-1234"},
		"gitee":  nil, // its body is the delivery's identity, its timestamp a one-time credential
	}
	event := map[string]string{"github": "push", "gitlab": "Push Hook", "gitee": "Push Hook"}
	for _, host := range []string{"github", "gitlab", "gitee"} {
		t.Run(host, func(t *testing.T) {
			b := newFakeBackend("github.com/a/b", "gitlab.com/a/b", "gitee.com/a/b")
			b.onStart = func(string, string) {}
			e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, b)
			headers := append(signed(host, event[host], body[host], e.clk), id[host]...)
			if r := e.do(t, "POST", "/hooks/"+host, body[host], headers...); r.status != http.StatusAccepted {
				t.Fatalf("first delivery: %d %s", r.status, r.body)
			}
			c := b.nextStart(t)
			e.tasks.Finish(c.id, TaskResult{})
			e.clk.Advance(time.Minute)
			r := e.do(t, "POST", "/hooks/"+host, body[host], headers...)
			var got hookResponse
			r.decode(t, &got)
			if r.status != http.StatusOK || !strings.Contains(got.Ignored, "already") {
				t.Fatalf("replay: %d %s, want 200 and ignored", r.status, r.body)
			}
			b.noStart(t)
		})
	}
}

func TestGiteePasswordModeRefusesOldOrMissingTimestamps(t *testing.T) {
	body := []byte(`{"repository": {"clone_url": "https://gitee.com/a/b.git"}}`)
	secret := hookSecrets["gitee"]
	ts := func(d time.Duration) string {
		return "X-Gitee-Timestamp: " + strconv.FormatInt(epoch.Add(d).UnixMilli(), 10)
	}
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"no timestamp", nil, http.StatusUnauthorized},
		{"two hours old", []string{ts(-2 * time.Hour)}, http.StatusUnauthorized},
		{"an hour ahead", []string{ts(time.Hour)}, http.StatusUnauthorized},
		{"not a number", []string{"X-Gitee-Timestamp: yesterday"}, http.StatusUnauthorized},
		{"recent", []string{ts(-time.Minute)}, http.StatusAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend("gitee.com/a/b"))
			h := append([]string{"X-Gitee-Token: " + secret, "X-Gitee-Event: Push Hook"}, tc.headers...)
			if r := e.do(t, "POST", "/hooks/gitee", body, h...); r.status != tc.want {
				t.Fatalf("status %d, want %d: %s", r.status, tc.want, r.body)
			}
		})
	}
}

// TestThirtyPushesASecondApartAreCoalesced: with checks of one repository
// paced at a burst of 5 and then one per 5 s, 30 signed pushes one second
// apart cost 11 checks (at 0-5 s, then 10, 15, 20, 25 and 30 s), the first
// at once, and the last push is not lost.
func TestThirtyPushesASecondApartAreCoalesced(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets, CheckSpacing: 5 * time.Second}, b)
	b.onStart = func(_, id string) { // each check is quick
		e.tasks.Running(id)
		e.tasks.Finish(id, TaskResult{})
	}
	body := []byte(`{"repository": {"clone_url": "https://github.com/a/b.git"}}`)
	var last hookResponse
	for i := range 30 {
		delivery := "X-GitHub-Delivery: d" + strconv.Itoa(i)
		r := e.do(t, "POST", "/hooks/github", body, append(signed("github", "push", body, e.clk), delivery)...)
		if r.status != http.StatusAccepted {
			t.Fatalf("push %d: %d %s", i, r.status, r.body)
		}
		r.decode(t, &last)
		if i == 0 {
			b.nextStart(t) // an isolated push is checked at once
		}
		settle(t) // let a due check start on time
		e.clk.Advance(time.Second)
	}
	eventually(t, e.clk, time.Second, func() bool {
		tk, _ := e.tasks.Get(last.Task.ID)
		return tk.Final()
	})
	if checks := 1 + len(b.starts); checks > 12 || checks < 8 {
		t.Fatalf("30 pushes one second apart caused %d checks, want about 11", checks)
	}
}

func TestThePacerAllowsABurstThenOneCheckPerSpacing(t *testing.T) {
	p := newPacer(5*time.Second, 3)
	at := func(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }
	for i, tc := range []struct{ now, want float64 }{
		{0, 0}, {0, 0}, {0, 0}, // the burst
		{0, 5},                                 // the bucket is empty: reserved for when it gains a token
		{5, 10},                                // the reservation took that token
		{30, 30}, {30, 30}, {30, 30}, {30, 35}, // refilled, not beyond the burst
	} {
		if got := p.reserve("k", at(tc.now)); !got.Equal(at(tc.want)) {
			t.Errorf("reservation %d at %vs: %v, want %vs", i, tc.now, got.Sub(epoch), tc.want)
		}
	}
	if got := p.reserve("other", at(30)); !got.Equal(at(30)) {
		t.Errorf("another key waits for k's bucket: %v", got.Sub(epoch))
	}
	if off := newPacer(0, 3); !off.reserve("k", at(1)).Equal(at(1)) {
		t.Error("a pacer with no spacing delays")
	}
}

func TestAnOperatorsFetchDoesNotWaitForTheWebhookPacing(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets, CheckSpacing: time.Hour}, b)
	b.onStart = func(_, id string) {
		e.tasks.Running(id)
		e.tasks.Finish(id, TaskResult{})
	}
	body := []byte(`{"repository": {"clone_url": "https://github.com/a/b.git"}}`)
	for i := range hookBurst + 1 {
		e.do(t, "POST", "/hooks/github", body, append(signed("github", "push", body, e.clk), "X-GitHub-Delivery: p"+strconv.Itoa(i))...)
		if i < hookBurst {
			b.nextStart(t)
		}
	}
	b.noStart(t) // the sixth push waits an hour for its turn
	var task Task
	e.do(t, "POST", "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &task)
	if c := b.nextStart(t); c.id != task.ID {
		t.Fatalf("the operator's fetch joined %s, but %s started", task.ID, c.id)
	}
}

// deliver posts a webhook and returns the answer.
func (e *testEnv) deliver(t *testing.T, host string, body []byte, headers []string) (response, hookResponse) {
	t.Helper()
	r := e.do(t, "POST", "/hooks/"+host, body, headers...)
	var got hookResponse
	if r.status < 300 {
		r.decode(t, &got)
	}
	return r, got
}

func TestAGitHubDeliveryReplayedHoursLaterIsRefused(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	b.onStart = func(_, id string) {}
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, b)
	body := []byte(`{"repository": {"clone_url": "https://github.com/a/b.git"}}`)
	headers := signed("github", "push", body, e.clk) // its X-GitHub-Delivery and signature, captured
	if r, _ := e.deliver(t, "github", body, headers); r.status != http.StatusAccepted {
		t.Fatalf("first delivery: %d %s", r.status, r.body)
	}
	e.tasks.Finish(b.nextStart(t).id, TaskResult{})
	for _, later := range []time.Duration{2 * time.Hour, 21 * time.Hour} { // 2 h, then 23 h after the first
		e.clk.Advance(later)
		r, got := e.deliver(t, "github", body, headers)
		if r.status != http.StatusOK || !strings.Contains(got.Ignored, "already") {
			t.Fatalf("replay %v later: %d %s, want 200 and ignored", later, r.status, r.body)
		}
		b.noStart(t)
	}
}

func TestAnIDlessGitLabDeliveryReplayedIsActedOnOnce(t *testing.T) {
	b := newFakeBackend("gitlab.com/a/b")
	b.onStart = func(_, id string) {}
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, b)
	// An older GitLab, or a proxy that drops headers: no Idempotency-Key,
	// no X-Gitlab-Event-UUID.
	headers := []string{"X-Gitlab-Event: Push Hook", "X-Gitlab-Token: " + hookSecrets["gitlab"]}
	push := func(after string) []byte {
		return []byte(`{"before": "1111", "after": "` + after + `", "project": {"git_http_url": "https://gitlab.com/a/b.git"}}`)
	}
	if r, _ := e.deliver(t, "gitlab", push("2222"), headers); r.status != http.StatusAccepted {
		t.Fatalf("first delivery: %d %s", r.status, r.body)
	}
	e.tasks.Finish(b.nextStart(t).id, TaskResult{})
	for range 3 {
		e.clk.Advance(10 * time.Minute)
		r, got := e.deliver(t, "gitlab", push("2222"), headers)
		if r.status != http.StatusOK || !strings.Contains(got.Ignored, "already") {
			t.Fatalf("replay: %d %s, want 200 and ignored", r.status, r.body)
		}
	}
	b.noStart(t)
	if r, _ := e.deliver(t, "gitlab", push("3333"), headers); r.status != http.StatusAccepted {
		t.Fatalf("another push: %d %s, want 202", r.status, r.body)
	}
	b.nextStart(t)
}

// Gitee's signature covers its timestamp, not the body: a captured
// delivery's timestamp and signature sent with another body, naming
// another mirrored repository, is refused (409: the signature is right
// but spent), in every form the token may take.
func TestAGiteeSignatureReplayedWithAnotherBodyIsRefused(t *testing.T) {
	b := newFakeBackend("gitee.com/a/b", "gitee.com/victim/big")
	b.onStart = func(_, id string) {}
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, b)
	body := []byte(`{"repository": {"clone_url": "https://gitee.com/a/b.git"}}`)
	headers := signed("gitee", "Push Hook", body, e.clk)
	if r, _ := e.deliver(t, "gitee", body, headers); r.status != http.StatusAccepted {
		t.Fatalf("first delivery: %d %s", r.status, r.body)
	}
	b.nextStart(t)
	e.clk.Advance(time.Minute)
	other := []byte(`{"repository": {"clone_url": "https://gitee.com/victim/big.git"}}`)
	ts := strings.TrimPrefix(headers[2], "X-Gitee-Timestamp: ")
	for name, token := range map[string]string{
		"same token":         GiteeSign(hookSecrets["gitee"], ts),
		"URL-encoded token":  url.QueryEscape(GiteeSign(hookSecrets["gitee"], ts)),
		"the password token": hookSecrets["gitee"],
	} {
		h := []string{"X-Gitee-Event: Push Hook", "X-Gitee-Token: " + token, "X-Gitee-Timestamp: " + ts}
		r, _ := e.deliver(t, "gitee", other, h)
		if r.status != http.StatusConflict || r.json(t)["code"] != "signature_reused" {
			t.Errorf("%s with another body: %d %s, want 409 signature_reused", name, r.status, r.body)
		}
	}
	b.noStart(t)
	// The same delivery again is a replay, answered as such.
	if r, got := e.deliver(t, "gitee", body, headers); r.status != http.StatusOK || !strings.Contains(got.Ignored, "already") {
		t.Fatalf("replay: %d %s, want 200 and ignored", r.status, r.body)
	}
	// A fresh signature for the other repository is fine.
	if r, _ := e.deliver(t, "gitee", other, signed("gitee", "Push Hook", other, e.clk)); r.status != http.StatusAccepted {
		t.Fatalf("a fresh delivery: %d %s, want 202", r.status, r.body)
	}
	if c := b.nextStart(t); c.key != "gitee.com/victim/big" {
		t.Fatalf("started %s", c.key)
	}
}

// A flood of signed deliveries naming 200 repositories of one host starts
// only the host's burst of checks; the rest get 429 with Retry-After, the
// API's fetches of that host too, while other hosts are not held back.
// Tokens come back with time, and a refused delivery sent again then is
// acted on.
func TestAFloodOfWebhooksForOneHostIsBounded(t *testing.T) {
	var keys []string
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("github.com/o/r%d", i))
	}
	b := newFakeBackend(append(keys, "gitlab.com/a/b")...)
	var started atomic.Int64
	b.onStart = func(_, id string) { started.Add(1) }
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets, HostRate: 60, HostBurst: 10}, b)
	var refused [][]string // headers of refused deliveries
	accepted := 0
	for i := range 200 {
		body := []byte(`{"repository": {"clone_url": "https://github.com/o/r` + strconv.Itoa(i) + `.git"}}`)
		h := signed("github", "push", body, e.clk)
		r, _ := e.deliver(t, "github", body, h)
		switch r.status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
				t.Fatalf("429 with Retry-After %q", r.header.Get("Retry-After"))
			}
			if len(refused) == 0 {
				refused = append(refused, append([]string{string(body)}, h...))
			}
		default:
			t.Fatalf("delivery %d: %d %s", i, r.status, r.body)
		}
	}
	if accepted != 10 {
		t.Fatalf("%d of 200 deliveries for one host accepted, want the burst of 10", accepted)
	}
	for range 10 {
		b.nextStart(t)
	}
	b.noStart(t)
	r := e.do(t, "POST", "/api/v1/repos/github.com/o/r199/fetch", nil, auth)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("an API fetch of the flooded host: %d %s, want 429 with Retry-After", r.status, r.body)
	}
	body := []byte(`{"project": {"git_http_url": "https://gitlab.com/a/b.git"}}`)
	if r, _ := e.deliver(t, "gitlab", body, signed("gitlab", "Push Hook", body, e.clk)); r.status != http.StatusAccepted {
		t.Fatalf("another host's delivery: %d %s, want 202", r.status, r.body)
	}
	b.nextStart(t)

	e.clk.Advance(time.Second) // one token back (60 a minute)
	if r, _ := e.deliver(t, "github", []byte(refused[0][0]), refused[0][1:]); r.status != http.StatusAccepted {
		t.Fatalf("the refused delivery sent again: %d %s, want 202", r.status, r.body)
	}
	b.nextStart(t)
	b.noStart(t)
	if n := started.Load(); n != 12 {
		t.Errorf("%d checks started, want 12", n)
	}
}

func TestTheHostRateAllowsABurstThenRatePerMinute(t *testing.T) {
	h := newHostRate(60, 3)
	at := func(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }
	for i, tc := range []struct {
		now  float64
		ok   bool
		wait time.Duration
	}{
		{0, true, 0}, {0, true, 0}, {0, true, 0}, // the burst
		{0, false, time.Second}, {0.5, false, 500 * time.Millisecond}, // refused: nothing is reserved
		{1, true, 0}, {1, false, time.Second},
		{60, true, 0}, {60, true, 0}, {60, true, 0}, {60, false, time.Second}, // refilled, not beyond the burst
	} {
		wait, ok := h.take("github.com", at(tc.now))
		if ok != tc.ok || wait != tc.wait {
			t.Errorf("take %d at %vs: %v %v, want %v %v", i, tc.now, ok, wait, tc.ok, tc.wait)
		}
	}
	if _, ok := h.take("gitlab.com", at(60)); !ok {
		t.Error("another host waits for github.com's bucket")
	}
	if _, ok := newHostRate(0, 3).take("x", at(0)); !ok {
		t.Error("a rate of 0 bounds")
	}
}

func TestTheDeliveryTableForgetsTheOldestBeyondItsBound(t *testing.T) {
	clk := clock.NewFake(epoch)
	d := newDeliveries(clk, time.Hour, 3)
	id := func(i int) claim { return claim{id: digestOf("github", "id", strconv.Itoa(i))} }
	for i := range 4 {
		if v := d.check(id(i)); v != fresh {
			t.Fatalf("delivery %d: %v, want fresh", i, v)
		}
		clk.Advance(time.Second)
	}
	if v := d.check(id(0)); v != fresh {
		t.Errorf("the oldest, dropped for room: %v, want fresh", v)
	}
	if v := d.check(id(3)); v != replayed {
		t.Errorf("a recent one: %v, want replayed", v)
	}
	clk.Advance(time.Hour)
	if v := d.check(id(3)); v != fresh {
		t.Errorf("after the TTL: %v, want fresh", v)
	}
	if len(d.order) > 8 || len(d.seen) > 3 {
		t.Errorf("%d entries in the map, %d queued", len(d.seen), len(d.order))
	}
}

// The full table (maxDeliveries, a day of deliveries) stays within the
// memory the package comment says.
func TestTheDeliveryTableStaysWithinItsMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a table of half a million entries")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	clk := clock.NewFake(epoch)
	d := newDeliveries(clk, deliveryTTL, maxDeliveries)
	for i := range maxDeliveries + maxDeliveries/2 {
		d.check(claim{id: digestOf("github", "id", strconv.Itoa(i))})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d deliveries remembered in %.1f MB", len(d.seen), float64(used)/1e6)
	if len(d.seen) != maxDeliveries {
		t.Errorf("%d entries, want %d", len(d.seen), maxDeliveries)
	}
	if used > 60e6 {
		t.Errorf("the full table takes %.1f MB, over 60 MB", float64(used)/1e6)
	}
	runtime.KeepAlive(d)
}
