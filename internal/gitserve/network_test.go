package gitserve_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Two forks mirrored as members of one object pool: a client of one fork
// cannot fetch the other fork's own commit through it (the pool has it,
// but the fork's refs do not reach it), and the pool's refs are not
// listed.
func TestAMemberOfAPoolRefusesAnotherMembersOwnCommit(t *testing.T) {
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("base", []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	own := map[string]string{}
	for _, name := range []string{"a", "b"} {
		if err := up.Fork("base", name); err != nil {
			t.Fatal(err)
		}
		if own[name], err = up.Commit(name, "main"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := map[string]string{}
	for _, name := range []string{"a", "b"} {
		key, _, err := repokey.Normalize(up.RepoURL(name), repokey.Options{AllowPrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.SyncIn(context.Background(), key, up.RepoURL(name), "base"); err != nil {
			t.Fatal(err)
		}
		keys[name] = key
	}
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Resolve: func(key string) (string, bool) {
		return st.Path(keys["a"]), key == "example.com/a"
	}}
	h.TipGrace = -1
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f := &fixture{h: h, srv: srv, url: srv.URL + "/example.com/a.git"}

	fetch := func(want string) (int, string) {
		code, _, body := f.post(t, v2Fetch("want "+want, "ofs-delta", "no-progress", "done"), v2)
		return code, body
	}
	if code, body := fetch(own["a"]); code != http.StatusOK {
		t.Fatalf("want of the member's own tip: %d %q", code, body)
	}
	if code, body := fetch(own["b"]); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
		t.Fatalf("want of the other member's own commit: %d %q, want 403 not our ref", code, body)
	}
	code, _, listing := f.post(t, []byte(pkt("command=ls-refs\n")+pkt("agent=test\n")+"0001"+pkt("peel\n")+"0000"), v2)
	if code != http.StatusOK || strings.Contains(listing, "refs/virtual") || strings.Contains(listing, own["b"]) {
		t.Fatalf("listing of the member: %d %q: the pool's refs or the other member's tip are listed", code, listing)
	}
	clone := t.TempDir()
	if err := gittest.Git("", "clone", "-q", "--mirror", f.url, clone); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir="+clone, "fsck", "--no-progress"); err != nil {
		t.Fatalf("a clone of the member: %v", err)
	}
	if err := gittest.Git("", "--git-dir="+clone, "cat-file", "-e", own["b"]); err == nil {
		t.Fatal("a clone of one member holds the other member's own commit")
	}
}
