package forge

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestParseForgeGivesEachKindItsAPIBase(t *testing.T) {
	for _, c := range []struct{ in, host, kind, api string }{
		{"github.com=github", "github.com", "github", "https://api.github.com"},
		{"ghe.example.org=github", "ghe.example.org", "github", "https://ghe.example.org/api"},
		{"GitLab.Example.org:8443=gitlab", "gitlab.example.org:8443", "gitlab", "https://gitlab.example.org:8443/api/v4"},
		{"codeberg.org=gitea", "codeberg.org", "gitea", "https://codeberg.org/api/v1"},
		{"git.example.org=gitea,api=http://10.0.0.7:3000/api/v1/", "git.example.org", "gitea", "http://10.0.0.7:3000/api/v1"},
		{"gitee.com=gitee", "gitee.com", "gitee", "https://gitee.com/api/v5"},
		{"[::1]:8080=gitlab,api=http://[::1]:8080/api/v4", "[::1]:8080", "gitlab", "http://[::1]:8080/api/v4"},
	} {
		f, err := ParseForge(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if f.Host != c.host || string(f.Kind) != c.kind || f.API.String() != c.api {
			t.Errorf("%q = %v, want %s=%s,api=%s", c.in, f, c.host, c.kind, c.api)
		}
	}
}

func TestParseForgeRefusesWhatItCannotUse(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"github.com", "want HOST=KIND"},
		{"github.com=sourceforge", "unknown kind"},
		{"=github", "empty host"},
		{"github.com:443=github", "default port"},
		{"git/hub=gitlab", "bad character"},
		{"gitee.example.org=gitee", "give api=URL"},
		{"x.example=gitlab,api=ftp://x.example/api/v4", "http or https"},
		{"x.example=gitlab,api=https://user:test-password@x.example/api/v4", "no user or password"},
		{"x.example=gitlab,api=https://x.example/api/v4?private_token=t", "no query"},
		{"x.example=gitlab,api=https://user:test-password@x.example:port/api/v4", "invalid port"},
		{"x.example=gitlab,api=/api/v4", "http or https"},
		{"x.example=gitlab,token=t", "unknown option"},
	} {
		_, err := ParseForge(c.in)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%q: error %v, want one saying %q", c.in, err, c.why)
		}
		if err != nil && strings.Contains(err.Error(), "test-password") {
			t.Errorf("%q: the error shows the password: %v", c.in, err)
		}
	}
}

func TestParseConfiguresTheWellKnownHostsAndGathersTokens(t *testing.T) {
	c, err := Parse(
		[]string{"gitlab.com=gitlab,api=https://gitlab.com/api/v4/", "ghe.example.org=github"},
		[]string{"github.com=test-token-1", "ghe.example.org=test-token-e"},
		" github.com=test-token-2,\ngitee.com=test-token-g ",
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Hosts()); got != "[codeberg.org ghe.example.org gitee.com github.com gitlab.com]" {
		t.Errorf("hosts %s", got)
	}
	if got := c.Tokens["github.com"]; len(got) != 2 || got[0].secret() != "test-token-1" || got[1].secret() != "test-token-2" {
		t.Errorf("github.com's tokens, in turn: flags first, then the environment; got %d", len(got))
	}
	if len(c.Tokens["gitee.com"]) != 1 || len(c.Tokens["codeberg.org"]) != 0 {
		t.Errorf("tokens %v", c.Tokens)
	}
	for _, bad := range []struct {
		tokens   []string
		env, why string
	}{
		{[]string{"nowhere.example=test-token-1"}, "", "not a forge"},
		{[]string{"github.com="}, "", "empty token"},
		{[]string{"github.com"}, "", "want HOST=TOKEN"},
		{nil, "github.com=test-token-1,github.com", TokensEnv + " entry #2"},
		{nil, "github.com=test\x7ftoken", "control"},
	} {
		if _, err := Parse(nil, bad.tokens, bad.env); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("tokens %q, env %q: error %v, want one saying %q", bad.tokens, bad.env, err, bad.why)
		}
	}
}

func TestGitHubEndpointsAreGraphQLUnderTheAPIBase(t *testing.T) {
	for in, want := range map[string]string{
		"github.com=github":      "https://api.github.com/graphql",
		"ghe.example.org=github": "https://ghe.example.org/api/graphql",
	} {
		f, err := ParseForge(in)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(f, []Token{NewToken("test-token-1")}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.(*githubClient).endpoint.String(); got != want {
			t.Errorf("%s: GraphQL at %s, want %s", in, got, want)
		}
	}
	f, _ := ParseForge("github.com=github")
	if _, err := New(f, nil, Options{}); err == nil || !strings.Contains(err.Error(), "--forge-token github.com=TOKEN") {
		t.Errorf("GitHub without a token: %v, want an error that says what to give", err)
	}
}

func TestEveryKindHasAClientAndTheWellKnownHostsAreItsOwn(t *testing.T) {
	defaults := DefaultForges()
	for host, want := range map[string]Kind{"github.com": GitHub, "gitlab.com": GitLab, "codeberg.org": Gitea, "gitee.com": Gitee} {
		if defaults[host].Kind != want {
			t.Errorf("%s is %q by default, want %q", host, defaults[host].Kind, want)
		}
		c, err := New(defaults[host], []Token{NewToken("test-token-1")}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if lag := ActivityLag(want); (lag > 0) != (want == GitLab) {
			t.Errorf("%s: activity lag %v (GitLab's last_activity_at lags by up to an hour, the others' times do not)", host, lag)
		}
		_, lists := c.(Lister)
		if _, looks := c.(Lookup); !looks || lists != (want == GitLab || want == Gitea) {
			t.Errorf("%s: lookup %v, lister %v", host, looks, lists)
		}
	}
}

func TestEachKindIsPacedByDefaultAsDocumented(t *testing.T) {
	want := map[Kind]time.Duration{GitHub: 0, GitLab: 250 * time.Millisecond, Gitea: 250 * time.Millisecond, Gitee: 750 * time.Millisecond}
	for host, f := range DefaultForges() {
		c, err := New(f, []Token{NewToken("test-token-1")}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var tr *transport
		switch c := c.(type) {
		case *githubClient:
			tr = c.transport
		case *gitlabClient:
			tr = c.restLookup.transport
		case *giteaClient:
			tr = c.restLookup.transport
		case *giteeClient:
			tr = c.restLookup.transport
		}
		if tr == nil {
			t.Fatalf("%s: a client of type %T", host, c)
		}
		if tr.pace != want[f.Kind] {
			t.Errorf("%s: paced at %v, want %v", host, tr.pace, want[f.Kind])
		}
	}
}

func TestWebhookTableSaysHowEachKindSignsAndNamesItsEvents(t *testing.T) {
	gh := WebhookOf(GitHub)
	if gh == nil || !gh.SignsBody() || !gh.IsRefEvent("push") || gh.IsRefEvent("issues") || gh.PingEvent != "ping" || gh.ProjectNamesRepo || !gh.AutoAdd {
		t.Errorf("github's webhook: %+v", gh)
	}
	gl := WebhookOf(GitLab)
	if gl == nil || gl.SignsBody() || !gl.IsRefEvent("Tag Push Hook") || gl.Auth != AuthPlainToken || !gl.HomepageNamesRepo || !gl.AutoAdd {
		t.Errorf("gitlab's webhook: %+v", gl)
	}
	ge := WebhookOf(Gitee)
	if ge == nil || ge.SignsBody() || ge.Auth != AuthGiteeToken || len(ge.DeliveryHeaders) != 0 || ge.HomepageNamesRepo || ge.AutoAdd || ge.TimestampHeader != "X-Gitee-Timestamp" {
		t.Errorf("gitee's webhook: %+v", ge)
	}
	if WebhookOf(Gitea) != nil || WebhookOf("svn") != nil {
		t.Error("gitea and unknown kinds have no webhook endpoint yet")
	}
}

func TestPushTimesKeysAnAnswerAsTheMirrorDoes(t *testing.T) {
	a := Answer{
		Pushed: []Push{
			{"Owner/Repo", t0.Add(-time.Hour)},
			{"Owner/Repo", t0}, // listed twice: its latest time
			{"group/sub/project", t0},
			{"bad/../path", t0},
		},
		Missing: []string{"gone/away"},
		Renamed: []Rename{{From: "a/b", To: "c/d", At: t0}},
	}
	times, refused := PushTimes(repokey.Folding{}, "git.example.org:8443", a)
	key, err := repokey.Folding{}.Canonical("git.example.org:8443/Owner/Repo")
	if err != nil {
		t.Fatal(err)
	}
	if refused != 1 || len(times) != 2 || !times[key.String()].Equal(t0) || !times["git.example.org:8443/group/sub/project"].Equal(t0) {
		t.Errorf("push times %v, %d refused; want the canonical keys, the latest time, 1 refused", times, refused)
	}
}

func TestRateLimitHeadersAreReadAndBounded(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		name string
		h    http.Header
		ok   bool
		want time.Time
	}{
		{"seconds", hdr("Retry-After", "120"), true, t0.Add(2 * time.Minute)},
		{"an HTTP date", hdr("Retry-After", t0.Add(time.Hour).Format(http.TimeFormat)), true, t0.Add(time.Hour)},
		{"a date in the past", hdr("Retry-After", t0.Add(-time.Hour).Format(http.TimeFormat)), true, t0},
		{"a year is bounded", hdr("Retry-After", "31536000"), true, t0.Add(maxWait)},
		{"negative", hdr("Retry-After", "-5"), false, time.Time{}},
		{"garbage", hdr("Retry-After", "soon"), false, time.Time{}},
		{"absent", hdr(), false, time.Time{}},
	} {
		got, ok := retryAfter(c.h, t0)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("Retry-After %s: %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		name      string
		h         http.Header
		ok        bool
		remaining int
		reset     time.Time
	}{
		{"GitHub's epoch seconds", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", fmt.Sprint(t0.Add(30*time.Minute).Unix())), true, 0, t0.Add(30 * time.Minute)},
		{"GitLab's", hdr("RateLimit-Remaining", "7", "RateLimit-Reset", fmt.Sprint(t0.Add(time.Minute).Unix())), true, 7, t0.Add(time.Minute)},
		{"seconds from now", hdr("RateLimit-Remaining", "0", "RateLimit-Reset", "90"), true, 0, t0.Add(90 * time.Second)},
		{"a past reset means a minute", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", fmt.Sprint(t0.Add(-time.Hour).Unix())), true, 0, t0.Add(time.Minute)},
		{"no reset means a minute", hdr("X-RateLimit-Remaining", "0"), true, 0, t0.Add(time.Minute)},
		{"garbage", hdr("X-RateLimit-Remaining", "many"), false, 0, time.Time{}},
	} {
		remaining, reset, ok := rateHeaders(c.h, t0)
		if ok != c.ok || remaining != c.remaining || !reset.Equal(c.reset) {
			t.Errorf("%s: %d, %v, %v; want %d, %v, %v", c.name, remaining, reset, ok, c.remaining, c.reset, c.ok)
		}
	}
}
