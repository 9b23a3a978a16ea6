package api

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
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
		"gitee":  nil, // the timestamp, token and body are the delivery's identity
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
		time.Sleep(2 * time.Millisecond) // let a due check start on time
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
