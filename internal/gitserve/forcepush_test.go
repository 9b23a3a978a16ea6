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
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// forcePushed is a standalone mirror, served as example.com/r, of an
// upstream that force-pushed main back over a commit that added a file,
// and moved its annotated tag v1 to a new tag object of the same commit.
// The mirror took both, and no prune ran: the commit, its tree, its blob
// and the old tag object are on the mirror's disk, and no ref reaches
// them, and the grace in which the old tips were still served is over.
type forcePushed struct {
	f      *fixture
	mirror string // the mirror's directory
	tip    string // main now
	old    string // the commit that the force-push took away
	tree   string // its tree
	blob   string // the file it added
	oldTag string // the tag object that v1 named before
	clone  string // a client's clone made before the force-push: it holds old
}

func newForcePushed(t *testing.T) *forcePushed {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("r", []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	fp := &forcePushed{}
	if fp.tip, err = up.Commit("r", "main"); err != nil {
		t.Fatal(err)
	}
	st, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, _, err := repokey.Normalize(up.RepoURL("r"), repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	key := repokey.Key(k)
	sync := func() {
		t.Helper()
		if _, err := st.Sync(context.Background(), key, up.RepoURL("r")); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	fp.mirror = st.Path(key)
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Clock: clk, Resolve: func(k repokey.Key) (string, bool) {
		return fp.mirror, k == "example.com/r"
	}}
	fp.f = &fixture{h: h, up: up, repo: fp.mirror}
	fp.f.srv = httptest.NewServer(h)
	t.Cleanup(fp.f.srv.Close)
	fp.f.url = fp.f.srv.URL + "/example.com/r.git"

	bare := filepath.Join(up.Dir, "r.git")
	if fp.old, err = up.AddBlob("r", "main", 4096); err != nil {
		t.Fatal(err)
	}
	fp.tree, fp.blob = rev(t, bare, fp.old+"^{tree}"), rev(t, bare, fp.old+":big.bin")
	fp.oldTag = rev(t, bare, "refs/tags/v1")
	sync()
	fp.clone = filepath.Join(t.TempDir(), "before")
	if err := gittest.Git("", "clone", "-q", fp.f.url, fp.clone); err != nil {
		t.Fatal(err)
	}
	if got := rev(t, fp.clone, "origin/main"); got != fp.old {
		t.Fatalf("the clone before the force-push has main %s, want %s", got, fp.old)
	}

	if err := gittest.Git("", "--git-dir="+bare, "update-ref", "refs/heads/main", fp.tip); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git("", "--git-dir="+bare, "tag", "-f", "-a", "-m", "v1 again", "v1", "refs/tags/v1^{}"); err != nil {
		t.Fatal(err)
	}
	sync()
	// The clone's listing advertised the old tips: they are served for a
	// grace period (see recentTips), which ends.
	clk.Advance(gitserve.DefaultTipGrace + time.Second)
	for _, oid := range []string{fp.old, fp.tree, fp.blob, fp.oldTag} {
		if err := gittest.Git("", "--git-dir="+fp.mirror, "cat-file", "-e", oid); err != nil {
			t.Fatalf("%s is not on the mirror's disk after the force-push: the test would not test the check", oid)
		}
	}
	if got := rev(t, fp.mirror, "refs/heads/main"); got != fp.tip {
		t.Fatalf("the mirror's main is %s after the force-push, want %s", got, fp.tip)
	}
	return fp
}

// rev names rev of the repository at dir (bare or a work tree).
func rev(t *testing.T, dir, rev string) string {
	t.Helper()
	out, err := gittest.Output(dir, "rev-parse", rev)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// fetch asks for want in protocol v2 or v0, as a client that knows the id.
func (fp *forcePushed) fetch(t *testing.T, want string, v0 bool) (int, string) {
	t.Helper()
	if v0 {
		code, _, body := fp.f.post(t, []byte(pkt("want "+want+" ofs-delta no-progress\n")+"0000"+pkt("done\n")), nil)
		return code, body
	}
	code, _, body := fp.f.post(t, v2Fetch("want "+want, "ofs-delta", "no-progress", "done"), v2)
	return code, body
}

// A blob, a tree, a commit and a tag object that a force-push took away
// are refused by their ids, in protocol v0 and v2, as "not our ref", while
// their objects are still on the mirror's disk; real git cannot fetch the
// blob by its id either. What the refs reach (a blob and a tree of
// history, the moved tag as it is now) is served by id, and the tip
// clones whole.
func TestObjectsThatAForcePushTookAwayAreRefusedByIDInV0AndV2(t *testing.T) {
	fp := newForcePushed(t)
	refused := map[string]string{
		"the blob the force-push took away":   fp.blob,
		"the tree the force-push took away":   fp.tree,
		"the commit the force-push took away": fp.old,
		"the tag object v1 named before":      fp.oldTag,
	}
	served := map[string]string{
		"a blob of history": rev(t, fp.mirror, fp.tip+"~1:file.txt"),
		"the tip's tree":    rev(t, fp.mirror, fp.tip+"^{tree}"),
		"the tag v1 now":    rev(t, fp.mirror, "refs/tags/v1"),
	}
	for _, v0 := range []bool{false, true} {
		proto := map[bool]string{false: "v2", true: "v0"}[v0]
		for what, oid := range refused {
			if code, body := fp.fetch(t, oid, v0); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
				t.Errorf("%s: want of %s: %d %.200q, want 403 not our ref", proto, what, code, body)
			}
		}
		for what, oid := range served {
			if code, body := fp.fetch(t, oid, v0); code != http.StatusOK || !strings.Contains(body, "PACK") {
				t.Errorf("%s: want of %s: %d %.200q, want 200 and a pack", proto, what, code, body)
			}
		}
	}
	dir := t.TempDir()
	if err := gittest.Git(dir, "init", "-q", "--bare"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(dir, "-c", "protocol.version=2", "fetch", "-q", fp.f.url, fp.blob); err == nil {
		t.Error("git fetch of the blob that the force-push took away, by its id, succeeded")
	}
	clone := filepath.Join(t.TempDir(), "after")
	if err := gittest.Git("", "clone", "-q", "--mirror", fp.f.url, clone); err != nil {
		t.Fatalf("a clone of the tip after the force-push: %v", err)
	}
	if err := gittest.Git("", "--git-dir="+clone, "fsck", "--no-progress"); err != nil {
		t.Fatalf("the clone after the force-push: %v", err)
	}
	if got := rev(t, clone, "refs/heads/main"); got != fp.tip {
		t.Fatalf("the clone's main is %s, want %s", got, fp.tip)
	}
	if err := gittest.Git("", "--git-dir="+clone, "cat-file", "-e", fp.blob); err == nil {
		t.Fatal("the clone after the force-push holds the blob that it took away")
	}
}

// The commit that a force-push took away, sent as a have, is not
// acknowledged (upload-pack would: the object is on disk), in protocol v0
// and v2, while a commit that the refs reach is; a clone made before the
// force-push, which holds the old commit and offers it, fetches the new
// tip with real git in both protocols.
func TestTheCommitThatAForcePushTookAwayIsNotAcknowledgedAsAHave(t *testing.T) {
	fp := newForcePushed(t)
	reached := rev(t, fp.mirror, fp.tip+"~1")
	v0 := func(have string) string {
		t.Helper()
		code, _, body := fp.f.post(t, []byte(pkt("want "+fp.tip+" multi_ack_detailed no-done side-band-64k ofs-delta\n")+"0000"+
			pkt("have "+have+"\n")+"0000"), nil)
		if code != http.StatusOK {
			t.Fatalf("v0 negotiation with have %s: %d %q", have, code, body)
		}
		return body
	}
	v2Have := func(have string) string {
		t.Helper()
		code, _, body := fp.f.post(t, v2Fetch("want "+fp.tip, "have "+have, "ofs-delta", "no-progress"), v2)
		if code != http.StatusOK {
			t.Fatalf("v2 negotiation with have %s: %d %q", have, code, body)
		}
		return body
	}
	for proto, negotiate := range map[string]func(string) string{"v0": v0, "v2": v2Have} {
		if body := negotiate(reached); !strings.Contains(body, "ACK "+reached) {
			t.Fatalf("%s: a have that the refs reach is not acknowledged: %q", proto, body)
		}
		if body := negotiate(fp.old); strings.Contains(body, "ACK "+fp.old) {
			t.Errorf("%s: the have of the commit that the force-push took away is acknowledged: %q", proto, body)
		}
	}
	// One such have among others: the rest of the request goes through.
	code, _, body := fp.f.post(t, v2Fetch("want "+fp.tip, "have "+fp.old, "have "+reached, "ofs-delta", "no-progress"), v2)
	if code != http.StatusOK || strings.Contains(body, "ACK "+fp.old) || !strings.Contains(body, "ACK "+reached) {
		t.Errorf("v2: haves of the old commit and a reached one: %d %q, want only the reached one acknowledged", code, body)
	}
	for _, proto := range []string{"0", "2"} {
		dir := filepath.Join(t.TempDir(), "c")
		if err := gittest.Git("", "clone", "-q", "--bare", fp.clone, dir); err != nil {
			t.Fatal(err)
		}
		if err := gittest.Git("", "--git-dir="+dir, "-c", "protocol.version="+proto, "fetch", "-q", "-f", fp.f.url, "+refs/heads/*:refs/remotes/m/*"); err != nil {
			t.Fatalf("v%s fetch by a clone that holds the old commit: %v", proto, err)
		}
		if got := rev(t, dir, "refs/remotes/m/main"); got != fp.tip {
			t.Fatalf("v%s fetch by a clone that holds the old commit: main %s, want %s", proto, got, fp.tip)
		}
	}
}
