package gitserve_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// forkNetwork is two forks of one repository, "a" and "b", each with a
// commit of its own, mirrored as members of one object pool; a Handler
// serves member a as example.com/a.
type forkNetwork struct {
	up   *gittest.Upstreams
	st   *mirror.Store
	keys map[string]string // each fork's mirror key
	own  map[string]string // each fork's own commit
	f    *fixture
}

// newForkNetwork makes the forks of a repository of one commit, or of
// the bare repository history when it is not "". before, when not nil,
// changes the upstreams before they are mirrored.
func newForkNetwork(t testing.TB, history string, before func(up *gittest.Upstreams)) *forkNetwork {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if history == "" {
		err = up.Create("base", []string{"main"}, []string{"v1"})
	} else {
		err = gittest.Git("", "clone", "-q", "--bare", history, filepath.Join(up.Dir, "base.git"))
	}
	if err != nil {
		t.Fatal(err)
	}
	n := &forkNetwork{up: up, keys: map[string]string{}, own: map[string]string{}}
	for _, name := range []string{"a", "b"} {
		if err := up.Fork("base", name); err != nil {
			t.Fatal(err)
		}
		if n.own[name], err = up.Commit(name, "main"); err != nil {
			t.Fatal(err)
		}
	}
	if before != nil {
		before(up)
	}
	n.st, err = mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.st.Close() })
	for _, name := range []string{"a", "b"} {
		key, _, err := repokey.Normalize(up.RepoURL(name), repokey.Options{AllowPrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		n.keys[name] = key.String()
		n.sync(t, name)
	}
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Resolve: func(key repokey.Key) (string, bool) {
		return n.st.Path(repokey.Key(n.keys["a"])), key == "example.com/a"
	}}
	h.TipGrace = -1
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	n.f = &fixture{h: h, srv: srv, url: srv.URL + "/example.com/a.git"}
	return n
}

// sync brings the mirror of fork name up to date with its upstream.
func (n *forkNetwork) sync(t testing.TB, name string) {
	t.Helper()
	if _, err := n.st.SyncIn(context.Background(), repokey.Key(n.keys[name]), n.up.RepoURL(name), "base"); err != nil {
		t.Fatal(err)
	}
}

// object names rev (a revision of the upstream of fork name) by its id.
func (n *forkNetwork) object(t testing.TB, name, rev string) string {
	t.Helper()
	out, err := gittest.Output("", "--git-dir="+filepath.Join(n.up.Dir, name+".git"), "rev-parse", rev)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// fetch asks member a for want, in protocol v2 or v0.
func (n *forkNetwork) fetch(t *testing.T, want string, v0 bool) (int, string) {
	t.Helper()
	if v0 {
		code, _, body := n.f.post(t, []byte(pkt("want "+want+" ofs-delta no-progress\n")+"0000"+pkt("done\n")), nil)
		return code, body
	}
	code, _, body := n.f.post(t, v2Fetch("want "+want, "ofs-delta", "no-progress", "done"), v2)
	return code, body
}

// Two forks mirrored as members of one object pool: a client of one fork
// cannot fetch the other fork's own commit through it (the pool has it,
// but the fork's refs do not reach it), and the pool's refs are not
// listed.
func TestAMemberOfAPoolRefusesAnotherMembersOwnCommit(t *testing.T) {
	n := newForkNetwork(t, "", nil)
	f, own := n.f, n.own

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

// The pool holds every member's trees and blobs, and tags: one that only
// fork b has (a file pushed to b, its tree, a tag of b's that names a
// commit both share) is refused through member a, in protocol v2 and v0,
// while a's own are served by id; with the pool's bitmap (after its
// repack) and without.
func TestAMemberOfAPoolRefusesAnotherMembersOwnBlobTreeAndTag(t *testing.T) {
	n := newForkNetwork(t, "", func(up *gittest.Upstreams) {
		if err := gittest.Git("", "--git-dir="+filepath.Join(up.Dir, "b.git"), "tag", "-a", "-m", "b's own tag", "b-only", "main~1"); err != nil {
			t.Fatal(err)
		}
	})
	refused := map[string]string{
		"b's own blob": n.object(t, "b", n.own["b"]+":file.txt"),
		"b's own tree": n.object(t, "b", n.own["b"]+"^{tree}"),
		"b's own tag":  n.object(t, "b", "refs/tags/b-only"),
	}
	served := map[string]string{
		"a's own blob":       n.object(t, "a", n.own["a"]+":file.txt"),
		"a's own tree":       n.object(t, "a", n.own["a"]+"^{tree}"),
		"a blob of history":  n.object(t, "a", n.own["a"]+"~1:file.txt"),
		"a tree of history":  n.object(t, "a", n.own["a"]+"~1^{tree}"),
		"a tag that a lists": n.object(t, "a", "refs/tags/v1"),
	}
	check := func(t *testing.T) {
		for _, v0 := range []bool{false, true} {
			proto := map[bool]string{false: "v2", true: "v0"}[v0]
			for what, oid := range refused {
				if code, body := n.fetch(t, oid, v0); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
					t.Errorf("%s: want of %s: %d %q, want 403 not our ref", proto, what, code, body)
				}
			}
			for what, oid := range served {
				if code, body := n.fetch(t, oid, v0); code != http.StatusOK || !strings.Contains(body, "PACK") {
					t.Errorf("%s: want of %s: %d %q, want 200 and a pack", proto, what, code, body)
				}
			}
			// One refused want refuses the request, whatever comes with it.
			code, _, body := n.f.post(t, v2Fetch("want "+served["a's own blob"], "want "+refused["b's own blob"], "want "+n.own["a"],
				"ofs-delta", "no-progress", "done"), v2)
			if code != http.StatusForbidden || !strings.Contains(body, refused["b's own blob"]) {
				t.Errorf("want of a's blob and commit with b's blob: %d %q, want 403 naming b's blob", code, body)
			}
		}
	}
	t.Run("without the pool's bitmap", check)
	if err := n.st.MaintainPool(context.Background(), "base"); err != nil {
		t.Fatal(err)
	}
	t.Run("with the pool's bitmap", check)
}

// A blob that member a's refs reached is refused once a force-push took
// it away, though a request of the same wants was served (and its answer
// kept) under the refs of before; the blob of the new tip is served.
func TestAMembersBlobCheckOfOneStateOfTheRefsIsNotUsedForAnother(t *testing.T) {
	n := newForkNetwork(t, "", nil)
	blob := n.object(t, "a", n.own["a"]+":file.txt")
	for range 2 {
		if code, body := n.fetch(t, blob, false); code != http.StatusOK {
			t.Fatalf("want of a's own blob: %d %q", code, body)
		}
	}
	if _, checks := gitserve.SharedRuns(n.f.h); checks != 1 {
		t.Fatalf("%d checks of one want under one state of the refs, want 1", checks)
	}
	if err := gittest.Git("", "--git-dir="+filepath.Join(n.up.Dir, "a.git"), "update-ref", "refs/heads/main", n.own["a"]+"~1"); err != nil {
		t.Fatal(err)
	}
	n.sync(t, "a")
	for _, v0 := range []bool{false, true} {
		if code, body := n.fetch(t, blob, v0); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
			t.Fatalf("want of the blob that a force-push took away (v0 %v): %d %q, want 403 not our ref", v0, code, body)
		}
	}
	if code, body := n.fetch(t, n.object(t, "a", n.own["a"]+"~1:file.txt"), false); code != http.StatusOK {
		t.Fatalf("want of the blob of a's new tip: %d %q", code, body)
	}
}

// A partial clone of a member fetches its blobs lazily, by id, as its
// checkout and `git log -p` need them: every one is a's, and is served;
// the clone passes fsck, and holds none of b's own objects nor gets them
// by a lazy fetch of its own (cat-file -e asks the member). (Protocol v2:
// a v0 client asks only for what the server advertises it may, and
// upload-pack advertises no fetch by id, standalone mirror or member.)
func TestAPartialCloneOfAMemberFetchesItsBlobsLazily(t *testing.T) {
	n := newForkNetwork(t, "", nil)
	for range 3 {
		if _, err := n.up.Commit("a", "main"); err != nil {
			t.Fatal(err)
		}
	}
	n.sync(t, "a")
	clone := t.TempDir()
	if err := gittest.Git("", "-c", "protocol.version=2", "clone", "-q", "--filter=blob:none", n.f.url, clone); err != nil {
		t.Fatalf("a partial clone of the member: %v", err)
	}
	before, _ := gitserve.SharedRuns(n.f.h)
	if _, err := gittest.Output(clone, "-c", "protocol.version=2", "log", "-p", "--no-color"); err != nil {
		t.Fatalf("git log -p of the partial clone, which fetches the blobs of history: %v", err)
	}
	if _, after := gitserve.SharedRuns(n.f.h); after == before {
		t.Fatal("git log -p of the partial clone fetched no blob: the clone was not partial")
	}
	if err := gittest.Git(clone, "fsck", "--no-progress"); err != nil {
		t.Fatalf("the partial clone: %v", err)
	}
	for _, oid := range []string{n.own["b"], n.object(t, "b", n.own["b"]+":file.txt")} {
		if err := gittest.Git(clone, "cat-file", "-e", oid); err == nil {
			t.Fatalf("the partial clone of a holds or lazily fetched b's own %s", oid)
		}
	}
}
