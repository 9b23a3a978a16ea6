package api

import (
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repostate"
)

const leaky = "git fetch http://10.0.0.5:6379/a/b.git: network: fatal: unable to access 'http://10.0.0.5:6379/a/b.git/': Failed to connect to 10.0.0.5 port 6379: Connection refused"

func TestThePublicAPIHidesErrorDetailsAndTheOperatorSeesThem(t *testing.T) {
	b := newFakeBackend("github.com/a/b")
	d := b.repos["github.com/a/b"]
	d.State, d.LastError = repostate.Failing, leaky
	d.History = []HistoryEntry{{At: epoch, Kind: "pull", Error: "pull from node 3: open /home/volunteer/gitfleet-data/repos/github.com/a/b: permission denied"}}
	b.repos["github.com/a/b"] = d
	e := newTestEnv(t, Config{}, b)
	tk, _ := e.tasks.Request("github.com/a/b")
	e.tasks.Finish(tk.ID, TaskResult{Err: leaky})

	for _, path := range []string{"/api/v1/repos", "/api/v1/repos/github.com/a/b", "/api/v1/tasks/" + tk.ID} {
		anon := string(e.do(t, "GET", path, nil).body)
		if strings.Contains(anon, "6379") || strings.Contains(anon, "/home/volunteer") || !strings.Contains(anon, ErrClassUnreachable) {
			t.Errorf("GET %s shows the public details, or no class: %s", path, anon)
		}
		op := string(e.do(t, "GET", path, nil, auth).body)
		if !strings.Contains(op, "port 6379") {
			t.Errorf("GET %s with the token does not show the details: %s", path, op)
		}
		wrong := string(e.do(t, "GET", path, nil, "Authorization: Bearer nope").body)
		if strings.Contains(wrong, "6379") {
			t.Errorf("GET %s with a wrong token shows the details: %s", path, wrong)
		}
	}
	r := e.do(t, "GET", "/api/v1/repos/github.com/a/b", nil)
	var got RepoDetail
	r.decode(t, &got)
	if len(got.History) != 1 || got.History[0].Error != ErrClassAuth {
		t.Errorf("history for the public: %+v, want one entry of class %q", got.History, ErrClassAuth)
	}
	if b.repos["github.com/a/b"].History[0].Error == ErrClassAuth {
		t.Error("hiding the details changed the backend's own history")
	}
}

func TestPublicErrorClasses(t *testing.T) {
	for _, tc := range []struct{ msg, class string }{
		{"", ""},
		{leaky, ErrClassUnreachable},
		{"git ls-remote https://github.com/a/b: not-found: remote: Repository not found.", ErrClassNotFound},
		{"git fetch https://h/x: timeout: context deadline exceeded", ErrClassTimeout},
		{"repository too large: 2.1 GiB over --max-repo-size 1 GiB", ErrClassTooLarge},
		{"too many refs: 200000 over --max-refs 50000", ErrClassTooManyRefs},
		{"git ls-remote http://h/x: too-many-refs: 50001 branches and tags", ErrClassTooManyRefs},
		{"git fetch http://h/x: too-large: fatal: Out of memory, malloc failed", ErrClassTooLarge},
		{"git fetch http://h/x: bad objects: error: object 1234: hasDotgit: contains '.git'", ErrClassBadObjects},
		{"mirror a/b: the upstream advertises no branches or tags (empty-advertisement)", ErrClassEmpty},
		{"blocked destination: 169.254.169.254 is link-local", ErrClassBlocked},
		{"git fetch https://h/x: auth: fatal: Authentication failed", ErrClassAuth},
		{"git fetch https://h/x: throttled: HTTP 429", ErrClassThrottled},
		{"git ls-remote https://h/x: legal: fatal: unable to access 'https://h/x/': The requested URL returned error: 451", ErrClassLegal},
		{"git fetch: disk: No space left on device at /srv/vol1/gitfleet", ErrClassInternal},
		{"no result after 30m0s: the node doing the check may have gone; try again", ErrClassTimeout},
		{"something nobody foresaw at /home/x", ErrClassOther},
		{"git ls-remote http://h:4030/x: network: connection refused", ErrClassUnreachable},
		{"git fetch https://h/x: error: fatal: unable to access 'https://h/x/': The requested URL returned error: 403", ErrClassAuth},
	} {
		if got := PublicError(tc.msg); got != tc.class {
			t.Errorf("PublicError(%q) = %q, want %q", tc.msg, got, tc.class)
		}
	}
}
