package repokey

import (
	"errors"
	"testing"
)

func TestRedirectReadsAMoveOnTheSameHostAndRefusesHostileTargets(t *testing.T) {
	opt := Options{AllowPrivate: true}
	from := Key("127.0.0.1:8080/old/repo")
	const fetch = "http://127.0.0.1:8080/old/repo.git"
	for _, tc := range []struct {
		name, location string
		want           Key
		sameHost       bool
		bad            bool
	}{
		{name: "absolute, same host", location: "http://127.0.0.1:8080/new/name.git/info/refs?service=git-upload-pack", want: "127.0.0.1:8080/new/name", sameHost: true},
		{name: "absolute path", location: "/neworg/repo/info/refs?service=git-upload-pack", want: "127.0.0.1:8080/neworg/repo", sameHost: true},
		{name: "relative path", location: "../../../other/repo.git/info/refs", bad: true},
		{name: "without git's query", location: "/new/name.git/info/refs", want: "127.0.0.1:8080/new/name", sameHost: true},
		{name: "another host is shown, not followed", location: "http://127.0.0.2/new/name.git/info/refs?service=git-upload-pack", want: "127.0.0.2/new/name"},
		{name: "another port is another host", location: "http://127.0.0.1:9090/new/name.git/info/refs", want: "127.0.0.1:9090/new/name"},
		{name: "dot-dot climbs", location: "/new/../../etc/info/refs", bad: true},
		{name: "escaped dot-dot", location: "/new/%2e%2e/etc/info/refs", bad: true},
		{name: "dot segment", location: "/new/./name/info/refs", bad: true},
		{name: "credentials", location: "http://user:secret@127.0.0.1:8080/new/name/info/refs", bad: true},
		{name: "user only", location: "http://user@127.0.0.1:8080/new/name/info/refs", bad: true},
		{name: "scheme downgrade or change", location: "https://127.0.0.1:8080/new/name/info/refs", bad: true},
		{name: "file scheme", location: "file:///etc/passwd/info/refs", bad: true},
		{name: "not git's request", location: "/new/name.git/", bad: true},
		{name: "another query", location: "/new/name/info/refs?service=git-upload-pack&x=1", bad: true},
		{name: "to itself: a loop", location: "/old/repo.git/info/refs?service=git-upload-pack", bad: true},
		{name: "to itself without .git", location: "/old/repo/info/refs", bad: true},
		{name: "an option-like segment", location: "/-upload-pack/x/info/refs", bad: true},
		{name: "control character", location: "/new/na\x00me/info/refs", bad: true},
		{name: "empty", location: "", bad: true},
		{name: "percent-escape in the name", location: "/new/n%61me/info/refs", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, toURL, same, err := Redirect(from, fetch, tc.location, opt)
			if tc.bad {
				if err == nil || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Redirect(%q) = %q, %v; want an ErrInvalid", tc.location, to, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Redirect(%q): %v", tc.location, err)
			}
			if to != tc.want || same != tc.sameHost {
				t.Errorf("Redirect(%q) = %q (same host %v), want %q (%v)", tc.location, to, same, tc.want, tc.sameHost)
			}
			if k, _, err := Normalize(toURL, opt); err != nil || k != to {
				t.Errorf("its URL %q is key %q (%v), want %q", toURL, k, err, to)
			}
		})
	}
}

func TestRedirectKeepsTheEgressPolicy(t *testing.T) {
	// Without AllowPrivate, a public upstream redirected to loopback is
	// refused, not shown.
	_, _, _, err := Redirect("example.org/a/b", "https://example.org/a/b.git", "https://127.0.0.1/x/y/info/refs", Options{})
	if err == nil {
		t.Fatal("a redirect to loopback was read as a key")
	}
	to, _, same, err := Redirect("example.org/a/b", "https://example.org/a/b.git", "https://example.org/c/d.git/info/refs", Options{})
	if err != nil || to != "example.org/c/d" || !same {
		t.Fatalf("got %q %v %v", to, same, err)
	}
}

func FuzzRedirect(f *testing.F) {
	for _, s := range []string{"/new/name.git/info/refs?service=git-upload-pack", "http://h/x/info/refs", "../a/info/refs", "//evil.example/x/info/refs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, location string) {
		to, _, _, err := Redirect("example.org/a/b", "https://example.org/a/b.git", location, Options{})
		if err != nil {
			return
		}
		if Check(to.String()) != nil || to == "example.org/a/b" {
			t.Fatalf("Redirect(%q) = %q, not a key to follow", location, to)
		}
	})
}
