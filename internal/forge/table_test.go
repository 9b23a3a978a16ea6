package forge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// webhookData is the directory of real webhook payloads, one directory a
// kind, shared by the project's checkouts (../shared/data from the root).
var webhookData = filepath.Join("..", "..", "..", "shared", "data", "webhooks")

// signedHeaders returns the headers with which a forge whose webhooks are
// w delivers body under secret at now, signed as the forge documents it
// (not with this package's code). A new scheme needs its case here.
func signedHeaders(t *testing.T, w *Webhook, secret string, body []byte, now time.Time) http.Header {
	t.Helper()
	h := http.Header{}
	switch w.Auth {
	case AuthHMACBody:
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(body)
		h.Set(w.TokenHeader, "sha256="+hex.EncodeToString(m.Sum(nil)))
	case AuthPlainToken:
		h.Set(w.TokenHeader, secret)
	case AuthGiteeToken:
		ts := strconv.FormatInt(now.UnixMilli(), 10)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts + "\n" + secret))
		h.Set(w.TimestampHeader, ts)
		h.Set(w.TokenHeader, base64.StdEncoding.EncodeToString(m.Sum(nil)))
	default:
		t.Fatalf("%s: authentication scheme %d has no case in signedHeaders", w.Name, w.Auth)
	}
	return h
}

// TestEveryRowOfTheTableIsComplete walks the table of kinds: adding a
// forge is adding a row, and this says what the row must hold.
func TestEveryRowOfTheTableIsComplete(t *testing.T) {
	seen := map[Kind]bool{}
	for _, row := range kinds {
		t.Run(string(row.kind), func(t *testing.T) {
			if row.kind == "" || strings.ToLower(string(row.kind)) != string(row.kind) || seen[row.kind] {
				t.Fatalf("kind %q: want a new lower-case name (it is the path under /hooks/ and the KIND of --forge)", row.kind)
			}
			seen[row.kind] = true
			if f, err := ParseForge("git.example.org=" + string(row.kind)); row.selfHosted != nil && err != nil {
				t.Errorf("a self-hosted forge of this kind: %v", err)
			} else if row.selfHosted == nil && err == nil {
				t.Errorf("not self-hosted, yet git.example.org got the API base %s", f.API)
			}
			if len(row.wellKnown) == 0 {
				t.Error("no well-known host: give the kind's public host and its API base")
			}
			for host := range row.wellKnown {
				f := DefaultForges()[host]
				if f.Kind != row.kind || f.API == nil {
					t.Errorf("well-known host %s: configured by default as %v", host, f)
				}
			}
			if row.newClient == nil {
				t.Fatal("no feed client constructor")
			}
			if (row.needsToken == "") != (row.tokenHint == "") {
				t.Errorf("needsToken %q with tokenHint %q: a forge that needs a token says which will do", row.needsToken, row.tokenHint)
			}
			for host := range row.wellKnown {
				c, err := New(DefaultForges()[host], []Token{NewToken("test-token-1")}, Options{})
				if _, ok := c.(Lookup); err != nil || !ok {
					t.Errorf("%s: client %T, %v; want a Lookup", host, c, err)
				}
				if _, err := New(DefaultForges()[host], nil, Options{}); (err != nil) != (row.needsToken != "") {
					t.Errorf("%s without a token: %v (needsToken %q)", host, err, row.needsToken)
				}
			}
			if row.pace < 0 || row.lag < 0 {
				t.Errorf("pace %v, lag %v", row.pace, row.lag)
			}
			if row.webhook != nil {
				checkWebhook(t, row.kind, row.webhook)
			}
		})
	}
}

func checkWebhook(t *testing.T, kind Kind, w *Webhook) {
	switch {
	case w.Name == "" || w.SecretName == "":
		t.Errorf("webhook: Name %q, SecretName %q: errors tell the operator where to set the secret", w.Name, w.SecretName)
	case w.EventHeader == "" || len(w.RefEvents) == 0:
		t.Errorf("webhook: event header %q, ref events %v", w.EventHeader, w.RefEvents)
	case w.PingEvent != "" && w.IsRefEvent(w.PingEvent):
		t.Errorf("webhook: the ping event %q is a ref event", w.PingEvent)
	case w.TokenHeader == "":
		t.Error("webhook: no header carries the credential")
	case (w.TimestampHeader != "") != (w.Auth == AuthGiteeToken):
		t.Errorf("webhook: timestamp header %q with scheme %d: a signed timestamp needs one, the others none", w.TimestampHeader, w.Auth)
	}

	// Its scheme takes a delivery signed as the forge signs it, and
	// refuses one under another secret, naming the header.
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	body := []byte(`{"ref": "refs/heads/main"}`)
	covered := body // what the handler gives Verify
	if !w.SignsBody() {
		covered = nil
	}
	good := signedHeaders(t, w, "the-secret", body, now)
	if err := w.Verify(good, "the-secret", covered, now); err != nil {
		t.Errorf("webhook: a delivery signed as %s signs it: %v", w.Name, err)
	}
	bad := signedHeaders(t, w, "another-secret", body, now)
	if err := w.Verify(bad, "the-secret", covered, now); err == nil || !strings.Contains(err.Error(), w.TokenHeader) {
		t.Errorf("webhook: a delivery under another secret: %v, want an error that names %s", err, w.TokenHeader)
	}
	if err := w.Verify(http.Header{}, "the-secret", body, now); err == nil || !strings.Contains(err.Error(), "on "+w.Name) {
		t.Errorf("webhook: an unsigned delivery: %v, want one that says where to set the secret", err)
	}

	// Its real payloads name their repository and their ref.
	if _, err := os.Stat(webhookData); os.IsNotExist(err) {
		t.Skipf("no webhook payloads at %s: the payloads of %s are not checked", webhookData, kind)
	}
	files, _ := filepath.Glob(filepath.Join(webhookData, string(kind), "*.json"))
	if len(files) == 0 {
		t.Fatalf("no real payloads of %s in %s: a forge's webhooks come with real samples", kind, filepath.Join(webhookData, string(kind)))
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.Parse("application/json", data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		keys := 0
		for _, u := range p.Repos {
			if _, _, err := repokey.Normalize(u, repokey.Options{}); err == nil {
				keys++
			}
		}
		if keys == 0 {
			t.Errorf("%s: no repository URL that is a key among %q", name, p.Repos)
		}
		isPing := w.PingEvent != "" && filepath.Base(name) == w.PingEvent+".json"
		if !isPing && !strings.HasPrefix(p.Ref, "refs/") {
			t.Errorf("%s: ref %q, want a full ref name", name, p.Ref)
		}
	}
}

func TestRealWebhookPayloadsGiveTheirRepositoryRefAndPushTime(t *testing.T) {
	tests := []struct {
		kind      Kind
		file      string
		repo, ref string    // the preferred repository URL, the ref
		pushedAt  time.Time // zero: the payload has none
	}{
		{GitHub, "github/push.json", "https://github.com/Codertocat/Hello-World.git", "refs/tags/simple-tag", time.Unix(1557933657, 0)},
		{GitHub, "github/push-new-branch.json", "https://github.com/Codertocat/Hello-World.git", "refs/heads/master", time.Unix(1557933657, 0)},
		{GitHub, "github/create.json", "https://github.com/Codertocat/Hello-World.git", "refs/tags/simple-tag", time.Date(2019, 5, 15, 15, 20, 56, 0, time.UTC)},
		{GitHub, "github/delete.json", "https://github.com/Codertocat/Hello-World.git", "refs/tags/simple-tag", time.Date(2019, 5, 15, 15, 20, 57, 0, time.UTC)},
		{GitHub, "github/ping.json", "https://github.com/Octocoders/Hello-World.git", "", time.Date(2019, 5, 15, 15, 20, 33, 0, time.UTC)},
		{GitLab, "gitlab/push.json", "http://example.com/mike/diaspora.git", "refs/heads/master", time.Time{}},
		{GitLab, "gitlab/tag-push.json", "http://example.com/jsmith/example.git", "refs/tags/v1.0.0", time.Time{}},
		{Gitee, "gitee/push.json", "https://gitee.com/oschina/git-osc.git", "refs/heads/test_version", time.Date(2020, 4, 15, 13, 9, 40, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(webhookData, tt.file))
			if os.IsNotExist(err) {
				t.Skipf("no webhook payloads at %s", webhookData)
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := WebhookOf(tt.kind).Parse("application/json", data)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Repos) == 0 || p.Repos[0] != tt.repo {
				t.Errorf("repository URLs %q, want %s first", p.Repos, tt.repo)
			}
			if p.Ref != tt.ref || !p.PushedAt.Equal(tt.pushedAt) {
				t.Errorf("ref %q pushed at %v, want %q at %v", p.Ref, p.PushedAt, tt.ref, tt.pushedAt)
			}
		})
	}
}

// A webhook's payload is untrusted: a field of the wrong type is absent,
// and only a body that is not a JSON object fails.
func TestWebhookPayloadFieldsOfTheWrongTypeAreAbsent(t *testing.T) {
	gh := WebhookOf(GitHub)
	tests := []struct {
		name, body string
		want       Payload
	}{
		{"wrong types", `{"ref": 7, "ref_type": [], "repository": {"clone_url": 5, "html_url": "https://github.com/a/b", "pushed_at": {"x": 1}}}`,
			Payload{Repos: []string{"https://github.com/a/b"}}},
		{"a null push time", `{"ref": "refs/heads/x", "repository": {"pushed_at": null}}`, Payload{Ref: "refs/heads/x"}},
		{"a push time that is no time", `{"repository": {"pushed_at": "yesterday"}}`, Payload{}},
		{"a short ref without its type", `{"ref": "main"}`, Payload{}},
		{"a short branch", `{"ref": "main", "ref_type": "branch"}`, Payload{Ref: "refs/heads/main"}},
		{"a repository ref_type", `{"ref": null, "ref_type": "repository"}`, Payload{}},
		{"JSON null", `null`, Payload{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := gh.Parse("application/json", []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(p.Repos, " ") != strings.Join(tt.want.Repos, " ") || p.Ref != tt.want.Ref || !p.PushedAt.Equal(tt.want.PushedAt) {
				t.Errorf("%+v, want %+v", p, tt.want)
			}
		})
	}
	for _, body := range []string{`{"repository": 7}`, `[]`, `{"repository": `, ``} {
		if _, err := gh.Parse("application/json", []byte(body)); err == nil || !strings.Contains(err.Error(), "malformed JSON payload") {
			t.Errorf("%q: %v, want malformed JSON", body, err)
		}
	}
	if _, err := gh.Parse("application/x-www-form-urlencoded", []byte("payload=%zz")); err == nil || !strings.Contains(err.Error(), "malformed form-encoded payload") {
		t.Errorf("a bad form: %v", err)
	}
}

// A delivery is identified by the first of its kind's delivery headers
// present; a signed timestamp is a credential to use once.
func TestDeliveryIDsAndOneTimeCredentialsComeFromTheRow(t *testing.T) {
	gl := WebhookOf(GitLab)
	h := http.Header{}
	h.Set("X-Gitlab-Event-UUID", "uuid-1")
	if id := gl.DeliveryID(h); id != "uuid-1" {
		t.Errorf("GitLab with its UUID only: %q", id)
	}
	h.Set("Idempotency-Key", "key-1")
	if id := gl.DeliveryID(h); id != "key-1" {
		t.Errorf("GitLab with both: %q, want the Idempotency-Key that a retry repeats", id)
	}
	if _, ok := gl.OneTimeCredential(h); ok {
		t.Error("GitLab's plain token is not a one-time credential")
	}
	ge := WebhookOf(Gitee)
	h = http.Header{}
	h.Set("X-Gitee-Timestamp", "1700000000000")
	if cred, ok := ge.OneTimeCredential(h); !ok || cred != "1700000000000" || ge.DeliveryID(h) != "" {
		t.Errorf("Gitee: credential %q (%v), id %q; want the timestamp, and no id", cred, ok, ge.DeliveryID(h))
	}
	if _, ok := WebhookOf(GitHub).OneTimeCredential(h); ok {
		t.Error("GitHub's signature covers the body: no one-time credential")
	}
}

// A feed's budget is counted in repositories: a GitHub request asks for
// a whole batch, a REST request for one repository.
func TestARequestAsksForABatchOnlyWhereTheKindSaysSo(t *testing.T) {
	for k, want := range map[Kind]int{GitHub: 100, GitLab: 1, Gitea: 1, Gitee: 1, "unknown": 1} {
		if got := PathsPerRequest(k, 100); got != want {
			t.Errorf("%s: %d repositories a request, want %d", k, got, want)
		}
	}
}
