package repokey

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalizeGivesOneKeyForEveryFormOfAURL(t *testing.T) {
	for _, tc := range []struct{ url, key, fetch string }{
		{"https://GitHub.com/a/b.git", "github.com/a/b", "https://github.com/a/b.git"},
		{"https://github.com/a/b", "github.com/a/b", "https://github.com/a/b"},
		{"https://github.com/a/b/", "github.com/a/b", "https://github.com/a/b/"},
		{"https://github.com:443/a/b.git", "github.com/a/b", "https://github.com:443/a/b.git"},
		{"git@github.com:a/b.git", "github.com/a/b", "ssh://git@github.com/a/b.git"},
		{"ssh://git@github.com/a/b.git", "github.com/a/b", "ssh://git@github.com/a/b.git"},
		{"git://github.com/a/b.git", "github.com/a/b", "git://github.com/a/b.git"},
		{"http://example.com:8080/x/y/z.git", "example.com:8080/x/y/z", "http://example.com:8080/x/y/z.git"},
		{"https://gitee.com/src-openeuler/python-flufl.lock.git", "gitee.com/src-openeuler/python-flufl.lock", "https://gitee.com/src-openeuler/python-flufl.lock.git"},
	} {
		key, fetch, err := Normalize(tc.url, Options{})
		if err != nil {
			t.Errorf("%q: %v", tc.url, err)
			continue
		}
		if key.String() != tc.key || fetch != tc.fetch {
			t.Errorf("%q: got key %q fetch %q, want %q %q", tc.url, key, fetch, tc.key, tc.fetch)
		}
		if err := Check(key.String()); err != nil {
			t.Errorf("Check(%q): %v", key, err)
		}
	}
}

func TestNormalizeRefusesHostileURLs(t *testing.T) {
	for _, tc := range []struct{ url, why string }{
		{"", "empty"},
		{"not a url", "space"},
		{"--upload-pack=touch /tmp/pwned", "starts with '-'"},
		{"ext::sh -c touch% /tmp/pwned", "space"},
		{"file:///etc/passwd", "scheme"},
		{"/srv/repos/a.git", "not a URL"},
		{"ftp://example.org/a.git", "scheme"},
		{"https://user:secret@github.com/a/b.git", "credentials"},
		{"https://token@github.com/a/b.git", "credentials"},
		{"https://github.com/a/../../etc", "'.' or '..'"},
		{"https://github.com/a/.hidden", "starts with '.'"},
		{"https://github.com/a/-x", "starts with '-'"},
		{"https://github.com/a.git/objects", "ends in .git"},
		{"https://github.com/", "no repository path"},
		{"https://github.com/a/b?x=1", "query"},
		{"https://127.0.0.1/a/b", "blocked destination: 127.0.0.1: loopback"},
		{"https://localhost/a/b", "blocked destination: localhost"},
		{"https://10.1.2.3/a/b", "blocked destination: 10.1.2.3: private"},
		{"https://[::1]/a/b", "blocked destination: ::1: loopback"},
		{"http://2130706433/a/b", "blocked destination: 2130706433: non-canonical"},
		{"http://0x7f.1/a/b", "blocked destination: 0x7f.1: non-canonical"},
		{"http://0177.0.0.1/a/b", "blocked destination: 0177.0.0.1: non-canonical"},
		{"http://127.1/a/b", "blocked destination: 127.1: non-canonical"},
		{"http://0/a/b", "blocked destination: 0: non-canonical"},
		{"http://evil.localhost/a/b", "blocked destination: evil.localhost"},
		{"http://github.com./a/b", "ends in a dot"},
		{"http://[64:ff9b::7f00:1]/a/b", "NAT64 of loopback"},
		{"http://100.64.0.1/a/b", "carrier-grade NAT"},
		{"https://github.com/" + strings.Repeat("a/", 300) + "b", "longer"},
		{" https://gitee.com/oschina/git-osc.git", "white space"},
		{"https://gitee.com/oschina/git-osc.git\n", "white space"},
		{"http://example.org:443/a/b", "port 443 is https's"},
		{"https://example.org:80/a/b", "port 80 is http's"},
		{"ssh://-oProxyCommand=x@example.org/a/b", "ssh user"},
		{"-oProxyCommand=x@example.org:a/b", "starts with '-'"},
		{"ssh://git@-oProxyCommand=x/a/b", "bad host"},
		{"http://example.org/u%2fa.git", "percent-escapes"},
	} {
		_, _, err := Normalize(tc.url, Options{})
		if err == nil {
			t.Errorf("%q: accepted", tc.url)
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%q: err = %v, want it to say %q", tc.url, err, tc.why)
		}
	}
}

func TestPrivateUpstreamsOnlyWhenAllowed(t *testing.T) {
	key, _, err := Normalize("http://127.0.0.1:8080/team/repo.git", Options{AllowPrivate: true})
	if err != nil || key != "127.0.0.1:8080/team/repo" {
		t.Fatalf("got %q, %v", key, err)
	}
}

func TestErrorsDoNotShowCredentials(t *testing.T) {
	for _, u := range []string{"https://user:ghp_SECRETSECRETSECRETSECRET1234@example.org/s/x.git",
		"https://ghp_SECRETSECRETSECRETSECRET1234@example.org/s/x.git", "https://u:SECRET@example.org/s/x.git"} {
		_, _, err := Normalize(u, Options{})
		if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), Redacted) {
			t.Errorf("%q: %v", u, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"fetch https://u:pw@h.example/x.git failed":            "fetch https://REDACTED@h.example/x.git failed",
		"ssh://git@h.example/x.git":                            "ssh://git@h.example/x.git",
		"ssh://tok:pw@h.example/x.git":                         "ssh://REDACTED@h.example/x.git",
		"token ghp_abcdefghijklmnopqrstuvwxyz012345 in a line": "token REDACTED in a line",
		"glpat-abcdefghijklmnopqrstu":                          "REDACTED",
		"plain text, no secret":                                "plain text, no secret",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckRefusesKeysThatEscape(t *testing.T) {
	for _, key := range []string{"", "github.com", "github.com/", "/etc/passwd", "github.com/../x", "github.com/a//b",
		"GitHub.com/a/b", "github.com/a/b.git", "github.com/a.git/b", "github.com/.git/x", "github.com/a\\b", "github.com/a:b",
		"0:ȁ/0", "h:x/a", "h:0080/a", "h:65536/a", "[fe80::1%eth0]:80/a"} {
		if Check(key) == nil {
			t.Errorf("Check(%q) accepted", key)
		}
	}
}
