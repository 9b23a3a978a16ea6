package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

var hookSecrets = map[string]string{"github": "gh-secret", "gitlab": "gl-secret", "gitee": "ge-secret"}

// GiteeSign is Gitee's signature of a delivery sent at timestamp (ms).
func GiteeSign(secret, timestamp string) string { return forge.GiteeSign(secret, timestamp) }

// Sign is forge.Sign, for the tests of this package.
func Sign(secret string, body []byte) string { return forge.Sign(secret, body) }

// payloadRepos is what a delivery of host with a JSON body names, as the
// handler reads it: its row's Parse, then the candidates of its URLs.
func payloadRepos(host string, body []byte, opt repokey.Options) ([]candidate, error) {
	hook := forge.WebhookOf(forge.Kind(host))
	if hook == nil {
		return nil, fmt.Errorf("no webhooks from %q", host)
	}
	p, err := hook.Parse("application/json", body)
	if err != nil {
		return nil, err
	}
	return candidates(p.Repos, opt), nil
}

// deliveries numbers the deliveries that signed makes.
var deliveryCount atomic.Int64

// signed returns the headers with which host would deliver body: GitHub
// and GitLab with a delivery id of their own, as they do, Gitee with none.
func signed(host, event string, body []byte, clk clock.Clock) []string {
	secret := hookSecrets[host]
	id := "delivery-" + strconv.FormatInt(deliveryCount.Add(1), 10)
	switch host {
	case "github":
		return []string{"X-GitHub-Event: " + event, "X-Hub-Signature-256: " + Sign(secret, body), "Content-Type: application/json",
			"X-GitHub-Delivery: " + id}
	case "gitlab":
		return []string{"X-Gitlab-Event: " + event, "X-Gitlab-Token: " + secret, "X-Gitlab-Event-UUID: " + id}
	default:
		ts := strconv.FormatInt(clk.Now().UnixMilli(), 10)
		return []string{"X-Gitee-Event: " + event, "X-Gitee-Token: " + GiteeSign(secret, ts), "X-Gitee-Timestamp: " + ts}
	}
}

func TestRealPayloadsTriggerACheckOfTheirRepository(t *testing.T) {
	tests := []struct{ host, file, event, key string }{
		{"github", "github/push.json", "push", "github.com/codertocat/hello-world"},
		{"github", "github/push-new-branch.json", "push", "github.com/codertocat/hello-world"},
		{"github", "github/push-organization.json", "push", "github.com/codertocat/hello-world"},
		{"github", "github/create.json", "create", "github.com/codertocat/hello-world"},
		{"github", "github/delete.json", "delete", "github.com/codertocat/hello-world"},
		{"gitlab", "gitlab/push.json", "Push Hook", "example.com/mike/diaspora"},
		{"gitlab", "gitlab/tag-push.json", "Tag Push Hook", "example.com/jsmith/example"},
		{"gitee", "gitee/push.json", "Push Hook", "gitee.com/oschina/git-osc"},
		{"gitee", "gitee/tag-push.json", "Tag Push Hook", "gitee.com/oschina/git-osc"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body := readPayload(t, tt.file)
			e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend(tt.key))
			r := e.do(t, "POST", "/hooks/"+tt.host, body, signed(tt.host, tt.event, body, e.clk)...)
			if r.status != http.StatusAccepted {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var got hookResponse
			r.decode(t, &got)
			if got.Key != tt.key || got.Task == nil || got.Task.State != TaskQueued {
				t.Fatalf("answer %s", r.body)
			}
			if c := e.b.nextStart(t); c.key != tt.key || c.id != got.Task.ID {
				t.Errorf("StartFetch(%s, %s), want (%s, %s)", c.key, c.id, tt.key, got.Task.ID)
			}
		})
	}
}

func TestEveryURLFormOfARealPayloadGivesOneKey(t *testing.T) {
	tests := []struct {
		host, file, key string
		others          int // other keys: GitHub's "url" is the API URL in some events
	}{
		{"github", "github/push.json", "github.com/codertocat/hello-world", 0},
		{"github", "github/push-new-branch.json", "github.com/codertocat/hello-world", 0},
		{"github", "github/create.json", "github.com/codertocat/hello-world", 1},
		{"github", "github/ping.json", "github.com/octocoders/hello-world", 1},
		{"gitlab", "gitlab/push.json", "example.com/mike/diaspora", 0},
		{"gitlab", "gitlab/tag-push.json", "example.com/jsmith/example", 0},
		{"gitee", "gitee/push.json", "gitee.com/oschina/git-osc", 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cands, err := payloadRepos(tt.host, readPayload(t, tt.file), repokey.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(cands) != 1+tt.others || cands[0].key.String() != tt.key {
				t.Fatalf("candidates %+v, want %s first and %d others", cands, tt.key, tt.others)
			}
			if !strings.HasPrefix(cands[0].url, "http") {
				t.Errorf("preferred URL %q, want the HTTP(S) clone URL", cands[0].url)
			}
		})
	}
}

func TestGitHubPingIsAnsweredWithoutACheck(t *testing.T) {
	body := readPayload(t, "github/ping.json")
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend("github.com/octocoders/hello-world"))
	r := e.do(t, "POST", "/hooks/github", body, signed("github", "ping", body, e.clk)...)
	if r.status != http.StatusOK || r.json(t)["ping"] != "ok" {
		t.Errorf("status %d body %s", r.status, r.body)
	}
	e.b.noStart(t)
}

func TestGiteePasswordAndSignatureForms(t *testing.T) {
	body := []byte(`{"repository": {"clone_url": "https://gitee.com/a/b.git"}}`)
	secret := hookSecrets["gitee"]
	ts := func(d time.Duration) string { return strconv.FormatInt(epoch.Add(d).UnixMilli(), 10) }
	tests := []struct {
		name    string
		headers []string
	}{
		{"password", []string{"X-Gitee-Token: " + secret, "X-Gitee-Timestamp: " + ts(0)}},
		{"signature", []string{"X-Gitee-Token: " + GiteeSign(secret, ts(0)), "X-Gitee-Timestamp: " + ts(0)}},
		{"URL-encoded signature", []string{"X-Gitee-Token: " + url.QueryEscape(GiteeSign(secret, ts(0))), "X-Gitee-Timestamp: " + ts(0)}},
		{"signature 59 minutes old", []string{"X-Gitee-Token: " + GiteeSign(secret, ts(-59*time.Minute)), "X-Gitee-Timestamp: " + ts(-59*time.Minute)}},
		{"clock 4 minutes ahead", []string{"X-Gitee-Token: " + GiteeSign(secret, ts(4*time.Minute)), "X-Gitee-Timestamp: " + ts(4*time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend("gitee.com/a/b"))
			r := e.do(t, "POST", "/hooks/gitee", body, append(tt.headers, "X-Gitee-Event: Push Hook")...)
			if r.status != http.StatusAccepted {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			e.b.nextStart(t)
		})
	}
}

// TestWebhookRefusals: each wrong delivery is refused with a 4xx and a
// JSON message, and triggers nothing.
func TestWebhookRefusals(t *testing.T) {
	ghBody := []byte(`{"ref": "refs/heads/main", "repository": {"clone_url": "https://github.com/a/b.git"}}`)
	glBody := []byte(`{"project": {"git_http_url": "https://gitlab.com/a/b.git"}}`)
	geBody := []byte(`{"repository": {"clone_url": "https://gitee.com/a/b.git"}}`)
	ghSigned := func(body []byte) []string {
		return []string{"X-GitHub-Event: push", "X-Hub-Signature-256: " + Sign(hookSecrets["github"], body)}
	}
	geSigned := func(secret string, at time.Time) []string {
		ts := strconv.FormatInt(at.UnixMilli(), 10)
		return []string{"X-Gitee-Event: Push Hook", "X-Gitee-Token: " + GiteeSign(secret, ts), "X-Gitee-Timestamp: " + ts}
	}
	tests := []struct {
		name, host string
		body       []byte
		headers    []string
		status     int
		msg        string
	}{
		{"GitHub without a signature", "github", ghBody, []string{"X-GitHub-Event: push"}, 401, "missing X-Hub-Signature-256"},
		{"GitHub with only the SHA-1 signature", "github", ghBody, []string{"X-GitHub-Event: push", "X-Hub-Signature: sha1=00"}, 401, "missing X-Hub-Signature-256"},
		{"GitHub signed with another secret", "github", ghBody, []string{"X-GitHub-Event: push", "X-Hub-Signature-256: " + Sign("other", ghBody)}, 401, "bad X-Hub-Signature-256"},
		{"GitHub with a tampered body", "github", append([]byte(" "), ghBody...), ghSigned(ghBody), 401, "bad X-Hub-Signature-256"},
		{"GitHub without an event header", "github", ghBody, ghSigned(ghBody)[1:], 400, "missing X-GitHub-Event"},
		{"GitHub with malformed JSON", "github", []byte(`{"repository": `), ghSigned([]byte(`{"repository": `)), 400, "malformed JSON payload"},
		{"GitHub without a repository URL", "github", []byte(`{"ref": "x"}`), ghSigned([]byte(`{"ref": "x"}`)), 400, "no usable repository URL"},
		{"GitHub with only bad URLs", "github", []byte(`{"repository": {"clone_url": "ftp://x/y", "html_url": "http://10.0.0.1/a/b"}}`),
			ghSigned([]byte(`{"repository": {"clone_url": "ftp://x/y", "html_url": "http://10.0.0.1/a/b"}}`)), 400, "no usable repository URL"},
		{"GitLab without a token", "gitlab", glBody, []string{"X-Gitlab-Event: Push Hook"}, 401, "missing X-Gitlab-Token"},
		{"GitLab with a wrong token", "gitlab", glBody, []string{"X-Gitlab-Event: Push Hook", "X-Gitlab-Token: gh-secret"}, 401, "wrong X-Gitlab-Token"},
		{"GitLab with malformed JSON", "gitlab", []byte("push!"), []string{"X-Gitlab-Event: Push Hook", "X-Gitlab-Token: gl-secret"}, 400, "malformed JSON payload"},
		{"Gitee without a token", "gitee", geBody, []string{"X-Gitee-Event: Push Hook"}, 401, "missing X-Gitee-Token"},
		{"Gitee with a wrong password", "gitee", geBody, []string{"X-Gitee-Event: Push Hook", "X-Gitee-Token: test12345", "X-Gitee-Timestamp: " + strconv.FormatInt(epoch.UnixMilli(), 10)}, 401, "wrong X-Gitee-Token"},
		{"Gitee signed with another secret", "gitee", geBody, geSigned("other", epoch), 401, "wrong X-Gitee-Token signature"},
		{"Gitee with a stale timestamp", "gitee", geBody, geSigned("ge-secret", epoch.Add(-61*time.Minute)), 401, "replayed"},
		{"Gitee with a timestamp in the future", "gitee", geBody, geSigned("ge-secret", epoch.Add(6*time.Minute)), 401, "in the future"},
		{"Gitee with a bad timestamp", "gitee", geBody, []string{"X-Gitee-Event: Push Hook", "X-Gitee-Token: x", "X-Gitee-Timestamp: yesterday"}, 401, "bad X-Gitee-Timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend("github.com/a/b", "gitlab.com/a/b", "gitee.com/a/b"))
			wantError(t, e.do(t, "POST", "/hooks/"+tt.host, tt.body, tt.headers...), tt.status, tt.msg)
			e.b.noStart(t)
		})
	}
}

func TestWebhookWithoutASecretIsRefused(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: map[string]string{"github": "gh-secret"}}, newFakeBackend("gitlab.com/a/b"))
	for _, host := range []string{"gitlab", "gitee"} {
		wantError(t, e.do(t, "POST", "/hooks/"+host, []byte("{}"), "X-Gitlab-Token: ", "X-Gitee-Token: "), http.StatusForbidden, "webhook secret not configured")
	}
}

func TestTheDefaultSecretServesEveryHost(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: map[string]string{"": "shared", "gitee": "own"}}, newFakeBackend("gitlab.com/a/b"))
	body := []byte(`{"project": {"web_url": "https://gitlab.com/a/b"}}`)
	if r := e.do(t, "POST", "/hooks/gitlab", body, "X-Gitlab-Event: Push Hook", "X-Gitlab-Token: shared"); r.status != http.StatusAccepted {
		t.Errorf("GitLab with the default secret: status %d: %s", r.status, r.body)
	}
	wantError(t, e.do(t, "POST", "/hooks/gitee", body, "X-Gitee-Event: Push Hook", "X-Gitee-Token: shared",
		"X-Gitee-Timestamp: "+strconv.FormatInt(epoch.UnixMilli(), 10)), http.StatusUnauthorized, "wrong")
}

func TestOversizedWebhookIsRefused(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets, MaxBody: 1024}, newFakeBackend())
	body := []byte(`{"x": "` + strings.Repeat("a", 2000) + `"}`)
	wantError(t, e.do(t, "POST", "/hooks/github", body, signed("github", "push", body, e.clk)...), http.StatusRequestEntityTooLarge, "larger than 1024")
}

func TestAnUnknownRepositoryIsNotFound(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend("github.com/other/repo"))
	body := []byte(`{"repository": {"clone_url": "https://github.com/a/b.git", "full_name": "a/b"}}`)
	r := e.do(t, "POST", "/hooks/github", body, signed("github", "push", body, e.clk)...)
	if m := r.json(t); r.status != http.StatusNotFound || m["code"] != "not_mirrored" || !strings.Contains(m["error"].(string), "github.com/a/b is not mirrored") {
		t.Errorf("status %d body %s", r.status, r.body)
	}
	e.b.noStart(t)
	if n := len(e.b.addedCalls()); n != 0 {
		t.Errorf("%d repositories added without auto-add", n)
	}
}

// wellKnownForges are the forges a full node knows without --forge.
func wellKnownForges() []forge.Forge {
	var out []forge.Forge
	for _, f := range forge.DefaultForges() {
		out = append(out, f)
	}
	return out
}

// A signed payload cannot choose what auto-add fetches: the URL is the
// endpoint's forge's and the payload's repository name, which must be a
// name. A GitHub delivery that names another forge, a private address, a
// path that climbs or a name with a control character adds nothing, or
// only github.com/<full_name>.
func TestAutoAddTakesTheURLFromTheEndpointsForgeNotThePayload(t *testing.T) {
	tests := []struct {
		name, body string
		wantAdded  string // the URL given to AddRepo; "": none
	}{
		{"another forge's URL", `{"repository": {"clone_url": "https://gitlab.com/a/b.git", "html_url": "https://gitlab.com/a/b", "full_name": "a/b"}}`, ""},
		{"a private address beside GitHub's URL", `{"repository": {"clone_url": "http://10.0.0.1/evil/x.git", "html_url": "https://github.com/a/b", "full_name": "a/b"}}`, "https://github.com/a/b.git"},
		{"a private address alone", `{"repository": {"clone_url": "http://10.0.0.1/a/b.git", "full_name": "a/b"}}`, ""},
		{"a metadata address", `{"repository": {"clone_url": "http://169.254.169.254/a/b.git", "full_name": "a/b"}}`, ""},
		{"another repository's URL than its name", `{"repository": {"clone_url": "https://github.com/x/y.git", "full_name": "a/b"}}`, "https://github.com/a/b.git"},
		{"a name that climbs", `{"repository": {"clone_url": "https://github.com/a/b.git", "full_name": "../../a/b"}}`, ""},
		{"a name with a control character", `{"repository": {"clone_url": "https://github.com/a/b.git", "full_name": "a/b\u001b[2J"}}`, ""},
		{"a name that is a URL", `{"repository": {"clone_url": "https://github.com/a/b.git", "full_name": "https://gitlab.com/a/b"}}`, ""},
		{"no name", `{"repository": {"clone_url": "https://github.com/a/b.git"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{WebhookSecrets: hookSecrets, AutoAdd: true, Forges: wellKnownForges()}
			e := newTestEnv(t, cfg, newFakeBackend())
			r := e.do(t, "POST", "/hooks/github", []byte(tt.body), signed("github", "push", []byte(tt.body), e.clk)...)
			e.srv.Close() // waits for background work
			calls := e.b.addedCalls()
			if tt.wantAdded == "" {
				if r.status/100 != 4 || len(calls) != 0 {
					t.Errorf("status %d body %s, added %+v; want a refusal and nothing added", r.status, r.body, calls)
				}
				return
			}
			if r.status != http.StatusAccepted || len(calls) != 1 || calls[0].url != tt.wantAdded {
				t.Errorf("status %d body %s, added %+v; want %s alone", r.status, r.body, calls, tt.wantAdded)
			}
		})
	}
}

func TestEventsThatDoNotChangeRefsAreIgnored(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend("github.com/a/b"))
	body := []byte(`{"repository": {"clone_url": "https://github.com/a/b.git"}}`)
	r := e.do(t, "POST", "/hooks/github", body, signed("github", "issues", body, e.clk)...)
	if r.status != http.StatusOK || r.json(t)["ignored"] == nil {
		t.Errorf("status %d body %s", r.status, r.body)
	}
	e.b.noStart(t)
}

func TestAutoAddAddsUnknownRepositoriesExceptFromGitee(t *testing.T) {
	tests := []struct {
		host, event string
		body        string
		wantAdded   string // fetch URL given to AddRepo; "" for none
	}{
		{"github", "push", `{"repository": {"ssh_url": "git@github.com:a/b.git", "clone_url": "https://github.com/a/b.git", "full_name": "a/b"}}`, "https://github.com/a/b.git"},
		{"gitlab", "Push Hook", `{"project": {"git_ssh_url": "git@gitlab.com:a/b.git", "git_http_url": "https://gitlab.com/a/b.git", "path_with_namespace": "a/b"}}`, "https://gitlab.com/a/b.git"},
		{"gitee", "Push Hook", `{"repository": {"clone_url": "https://gitee.com/a/b.git"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			e := newTestEnv(t, Config{WebhookSecrets: hookSecrets, AutoAdd: true, Forges: wellKnownForges()}, newFakeBackend())
			r := e.do(t, "POST", "/hooks/"+tt.host, []byte(tt.body), signed(tt.host, tt.event, []byte(tt.body), e.clk)...)
			var got hookResponse
			r.decode(t, &got)
			if tt.wantAdded == "" {
				if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "not auto-added") {
					t.Errorf("status %d body %s", r.status, r.body)
				}
				e.srv.Close() // waits for background work
				if calls := e.b.addedCalls(); len(calls) != 0 {
					t.Errorf("added %+v", calls)
				}
				return
			}
			if r.status != http.StatusAccepted || !got.Added {
				t.Fatalf("status %d body %s", r.status, r.body)
			}
			e.srv.Close()
			if calls := e.b.addedCalls(); len(calls) != 1 || calls[0].url != tt.wantAdded {
				t.Errorf("AddRepo calls %+v, want one with %s", calls, tt.wantAdded)
			}
		})
	}
}

func TestAKeyKnownInLowerCaseMatches(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend("github.com/codertocat/hello-world"))
	body := []byte(`{"repository": {"clone_url": "https://github.com/Codertocat/Hello-World.git"}}`)
	r := e.do(t, "POST", "/hooks/github", body, signed("github", "push", body, e.clk)...)
	if r.status != http.StatusAccepted || r.json(t)["key"] != "github.com/codertocat/hello-world" {
		t.Errorf("status %d body %s", r.status, r.body)
	}
}

func TestGitHubFormEncodedPayload(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, newFakeBackend("github.com/a/b"))
	body := []byte(url.Values{"payload": {`{"repository": {"clone_url": "https://github.com/a/b.git"}}`}}.Encode())
	headers := append(signed("github", "push", body, e.clk), "Content-Type: application/x-www-form-urlencoded")
	if r := e.do(t, "POST", "/hooks/github", body, headers...); r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if c := e.b.nextStart(t); c.key != "github.com/a/b" {
		t.Errorf("StartFetch(%s)", c.key)
	}
}

func TestWebhookAnswersBeforeTheCheckIsHandedOver(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	release := make(chan struct{})
	b.onStart = func(string, string) { <-release }
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, b)
	defer close(release) // before Close waits for the background hand-over
	body := []byte(`{"repository": {"clone_url": "https://github.com/a/b.git"}}`)
	if r := e.do(t, "POST", "/hooks/github", body, signed("github", "push", body, e.clk)...); r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	e.b.nextStart(t) // still blocked in StartFetch: the answer did not wait for it
}

// TestABurstOfPushesBecomesAtMostTwoChecks: 50 pushes while a check runs
// share one follow-up check, started when the running one ends.
func TestABurstOfPushesBecomesAtMostTwoChecks(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, b)
	body := []byte(`{"repository": {"clone_url": "https://github.com/a/b.git"}}`)
	push := func() hookResponse {
		var got hookResponse
		e.do(t, "POST", "/hooks/github", body, signed("github", "push", body, e.clk)...).decode(t, &got)
		return got
	}
	first := push()
	if c := b.nextStart(t); c.id != first.Task.ID {
		t.Fatalf("first check %s, want %s", c.id, first.Task.ID)
	}
	e.tasks.Running(first.Task.ID)

	ids := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			got := push()
			mu.Lock()
			ids[got.Task.ID]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ids) != 1 || ids[first.Task.ID] != 0 {
		t.Fatalf("the burst got tasks %v, want one follow-up shared by all 50", ids)
	}
	b.noStart(t) // the follow-up waits for the running check

	e.tasks.Finish(first.Task.ID, TaskResult{})
	second := b.nextStart(t)
	if ids[second.id] != 50 {
		t.Errorf("second check %s is not the burst's follow-up %v", second.id, ids)
	}
	b.noStart(t)
}

// hintingBackend is a fakeBackend that hears change hints.
type hintingBackend struct {
	*fakeBackend
	mu    sync.Mutex
	hints map[string]time.Time
}

func (b *hintingBackend) ChangeHint(_ context.Context, k repokey.Key, pushedAt time.Time) error {
	key := k.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hints[key] = pushedAt
	return nil
}

// A signed push for a mirrored repository is a change hint at its receipt
// time, heard before the check it asks for; an unsigned one is not.
func TestAPushWebhookIsAChangeHintAtItsReceiptTime(t *testing.T) {
	const key = "github.com/codertocat/hello-world"
	b := &hintingBackend{fakeBackend: newFakeBackend(key), hints: map[string]time.Time{}}
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets}, b.fakeBackend)
	e.srv.fleet.Hints = b
	e.clk.Advance(time.Hour)
	body := readPayload(t, "github/push.json")
	headers := signed("github", "push", body, e.clk)
	bad := append([]string{"X-Hub-Signature-256: " + Sign("wrong", body)}, headers[0], headers[2])
	if r := e.do(t, "POST", "/hooks/github", body, bad...); r.status != http.StatusUnauthorized {
		t.Fatalf("unsigned: %d", r.status)
	}
	if len(b.hints) != 0 {
		t.Fatalf("an unsigned delivery made a hint: %v", b.hints)
	}
	if r := e.do(t, "POST", "/hooks/github", body, headers...); r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	b.mu.Lock()
	at, ok := b.hints[key]
	b.mu.Unlock()
	if !ok || !at.Equal(e.clk.Now()) {
		t.Fatalf("hint %v (%v), want one at the receipt time %v", at, ok, e.clk.Now())
	}
}
