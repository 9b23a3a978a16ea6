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

// archived is a mirror, served as example.com/r, that archives rewrites,
// of an upstream that added a file to main and force-pushed it away: the
// mirror keeps the old tip under refs/archive/.
type archived struct {
	f    *fixture
	dir  string // the mirror
	old  string // the commit the force-push took away, archived
	blob string // the file it added
	tip  string // main now
}

func newArchived(t *testing.T) *archived {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("r", []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	a := &archived{}
	if a.tip, err = up.Commit("r", "main"); err != nil {
		t.Fatal(err)
	}
	st, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	st.SetArchive(mirror.ArchivePolicy{All: true})
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
	bare := filepath.Join(up.Dir, "r.git")
	if a.old, err = up.AddBlob("r", "main", 4096); err != nil {
		t.Fatal(err)
	}
	a.blob = rev(t, bare, a.old+":big.bin")
	sync()
	if err := gittest.Git("", "--git-dir="+bare, "update-ref", "refs/heads/main", a.tip); err != nil {
		t.Fatal(err)
	}
	sync()
	refs, err := st.Archive(context.Background(), key)
	if err != nil || len(refs) != 1 || refs[0].OID != a.old {
		t.Fatalf("the mirror's archive is %v (%v), want main at %s", refs, err, a.old)
	}
	a.dir = st.Path(key)
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Clock: clk, Resolve: func(k repokey.Key) (string, bool) {
		return a.dir, k == "example.com/r"
	}}
	a.f = &fixture{h: h, up: up, repo: a.dir}
	a.f.srv = httptest.NewServer(h)
	t.Cleanup(a.f.srv.Close)
	a.f.url = a.f.srv.URL + "/example.com/r.git"
	return a
}

// The archive refs are in no advertisement: v0's, and v2's ls-refs with
// no prefix, with refs/, and with refs/archive/ itself; a mirror clone
// does not get them nor what only they reach.
func TestArchiveRefsAreHiddenInV0AndV2AdvertisementsAndLsRefs(t *testing.T) {
	a := newArchived(t)
	resp, err := a.f.srv.Client().Get(a.f.url + "/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	adv, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(adv), "refs/heads/main") {
		t.Fatalf("v0 advertisement: %d %.300q", resp.StatusCode, adv)
	}
	if strings.Contains(string(adv), "refs/archive") || strings.Contains(string(adv), a.old) {
		t.Errorf("the v0 advertisement shows the archive: %q", adv)
	}
	for _, prefixes := range [][]string{nil, {"refs/"}, {"refs/archive/"}, {"refs/archive/", "refs/heads/"}} {
		body := pkt("command=ls-refs\n") + pkt("agent=test\n") + "0001" + pkt("peel\n") + pkt("symrefs\n")
		for _, p := range prefixes {
			body += pkt("ref-prefix " + p + "\n")
		}
		code, _, listing := a.f.post(t, []byte(body+"0000"), v2)
		if code != http.StatusOK {
			t.Fatalf("ls-refs %v: %d %q", prefixes, code, listing)
		}
		if strings.Contains(listing, "refs/archive") || strings.Contains(listing, a.old) {
			t.Errorf("ls-refs with prefixes %v lists the archive: %q", prefixes, listing)
		}
	}
	clone := filepath.Join(t.TempDir(), "c")
	if err := gittest.Git("", "clone", "-q", "--mirror", a.f.url, clone); err != nil {
		t.Fatal(err)
	}
	if out, _ := gittest.Output("", "--git-dir="+clone, "for-each-ref", "refs/archive/"); out != "" {
		t.Errorf("the mirror clone has archive refs: %q", out)
	}
	if err := gittest.Git("", "--git-dir="+clone, "cat-file", "-e", a.blob); err == nil {
		t.Error("the clone holds the blob only the archive reaches")
	}
}

// What an archive ref reaches is served by id: the archived commit and a
// blob of it, in v0 and v2, and with real git's fetch of the commit's id
// in both protocols.
func TestWhatAnArchiveRefReachesIsFetchedByID(t *testing.T) {
	a := newArchived(t)
	for _, oid := range []string{a.old, a.blob} {
		if code, _, body := a.f.post(t, []byte(pkt("want "+oid+" ofs-delta no-progress\n")+"0000"+pkt("done\n")), nil); code != http.StatusOK || !strings.Contains(body, "PACK") {
			t.Errorf("v0 want of %s: %d %.200q, want a pack", oid, code, body)
		}
		if code, _, body := a.f.post(t, v2Fetch("want "+oid, "ofs-delta", "no-progress", "done"), v2); code != http.StatusOK || !strings.Contains(body, "PACK") {
			t.Errorf("v2 want of %s: %d %.200q, want a pack", oid, code, body)
		}
	}
	for _, proto := range []string{"2", "0"} {
		dir := t.TempDir()
		if err := gittest.Git(dir, "init", "-q", "--bare"); err != nil {
			t.Fatal(err)
		}
		if err := gittest.Git(dir, "-c", "protocol.version="+proto, "fetch", "-q", a.f.url, a.old); err != nil {
			t.Errorf("protocol %s: git fetch of the archived commit by id: %v", proto, err)
			continue
		}
		if err := gittest.Git(dir, "cat-file", "-e", a.blob); err != nil {
			t.Errorf("protocol %s: the fetch of the archived commit lacks its blob", proto)
		}
	}
}
