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
	d.State, d.LastError, d.ErrorClass = repostate.Failing, leaky, repostate.ClassUnreachable
	d.History = []HistoryEntry{{At: epoch, Kind: "pull", Error: "pull from node 3: open /home/volunteer/gitfleet-data/repos/github.com/a/b: permission denied",
		ErrorClass: repostate.ClassAuth.String()}}
	b.repos["github.com/a/b"] = d
	e := newTestEnv(t, Config{}, b)
	tk, _ := e.tasks.Request("github.com/a/b")
	e.tasks.Finish(tk.ID, TaskResult{Err: leaky, Class: repostate.ClassUnreachable})

	for _, path := range []string{"/api/v1/repos", "/api/v1/repos/github.com/a/b", "/api/v1/tasks/" + tk.ID} {
		anon := string(e.do(t, "GET", path, nil).body)
		if strings.Contains(anon, "6379") || strings.Contains(anon, "/home/volunteer") || !strings.Contains(anon, `"upstream unreachable"`) {
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
	if len(got.History) != 1 || got.History[0].Error != "upstream refused access" {
		t.Errorf("history for the public: %+v, want one entry of class %q", got.History, repostate.ClassAuth)
	}
	if got.ErrorClass != repostate.ClassUnreachable || got.LastError != "upstream unreachable" {
		t.Errorf("the public sees class %q and error %q", got.ErrorClass, got.LastError)
	}
	if b.repos["github.com/a/b"].History[0].Error == "upstream refused access" {
		t.Error("hiding the details changed the backend's own history")
	}
}

// What anyone sees of an error is its class as the node that failed said
// it, whatever its text says: no longer a guess from the words. A text
// with no class (stored by a previous version) is "failed".
func TestThePublicSeesTheClassTheNodeSaid(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		class repostate.Class
		want  string
	}{
		{leaky, repostate.ClassUnreachable, "upstream unreachable"},
		{"git ls-remote https://github.com/a/b: not-found: remote: Repository not found.", repostate.ClassNotFound, "not found"},
		// The text of one class, said of another: the class wins.
		{"repository too large: 2.1 GiB over --max-repo-size 1 GiB", repostate.ClassTimeout, "timeout"},
		{"too many refs: 200000 over --max-refs 50000", repostate.ClassTooManyRefs, "too many refs"},
		{"something nobody foresaw at /home/x", repostate.NoClass, "failed"},
		{"", repostate.ClassAuth, ""},
	} {
		if got := PublicError(tc.msg, tc.class); got != tc.want {
			t.Errorf("PublicError(%q, %d) = %q, want %q", tc.msg, tc.class, got, tc.want)
		}
	}
	if got := PublicErrorText("boom at /srv/x", "a class of a newer version"); got != "failed" {
		t.Errorf("an unknown class text shows as %q", got)
	}
	if got := PublicErrorText("boom", "forged refs"); got != "forged refs" {
		t.Errorf("a known class text shows as %q", got)
	}
}
