package gitserve_test

import (
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// get sends an info/refs GET as git would, with the Git-Protocol header hdr
// (none when empty).
func (f *fixture) get(t *testing.T, gitProtocol string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.url+"/info/refs?service=git-upload-pack", nil)
	if err != nil {
		t.Fatal(err)
	}
	if gitProtocol != "" {
		req.Header.Set("Git-Protocol", gitProtocol)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Eight identical listings at once run one upload-pack, and so do the ones
// after them while the refs stay as they are; a force-push between two
// requests gets the second one a listing of the new refs, never the old
// one kept.
func TestListingsAreSharedPerStateOfTheRefsAndAForcePushIsSeenAtOnce(t *testing.T) {
	f := newFixture(t, nil)
	first := head(t, f)
	tip, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	_, caps := f.get(t, "version=2")
	if !strings.HasPrefix(caps, pkt("version 2\n")) {
		t.Fatalf("v2 capabilities: %q", caps)
	}
	gate := make(chan struct{})
	gitserve.SetBeforeAnswer(f.h, func(string) { <-gate })
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		wg.Go(func() {
			code, _, body := f.post(t, lsRefs, v2)
			if code != http.StatusOK {
				t.Errorf("ls-refs %d: %d %q", i, code, body)
			}
			bodies[i] = body
		})
	}
	waitFor(t, "the eight listings to be in", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.posts) == 8
	})
	close(gate)
	wg.Wait()
	for i, b := range bodies {
		if b != bodies[0] || !strings.Contains(b, tip+" refs/heads/main") {
			t.Fatalf("listing %d: %q, want %q with main at %s", i, b, bodies[0], tip)
		}
	}
	if code, _, body := f.post(t, lsRefs, v2); code != http.StatusOK || body != bodies[0] {
		t.Fatalf("a later listing of the same refs: %d %q", code, body)
	}
	_, v0 := f.get(t, "")
	if !strings.Contains(v0, tip+" refs/heads/main") {
		t.Fatalf("v0 advertisement: %q, want main at %s", v0, tip)
	}
	// git ran three times to read its capabilities (capsTemplate), and
	// never for the listings and the advertisement, which the refs answer.
	if answers, _ := gitserve.SharedRuns(f.h); answers != 3 {
		t.Fatalf("%d upload-pack runs for the capabilities, nine listings and an advertisement of one state, want 3", answers)
	}

	rewind(t, f, first) // the force-push lands between two requests
	if code, _, body := f.post(t, lsRefs, v2); code != http.StatusOK ||
		!strings.Contains(body, first+" refs/heads/main") || strings.Contains(body, tip) {
		t.Fatalf("the listing after a force-push: %d %q, want main at %s and no %s", code, body, first, tip)
	}
	if _, v0 := f.get(t, ""); !strings.Contains(v0, first+" refs/heads/main") || strings.Contains(v0, tip) {
		t.Fatalf("the v0 advertisement after a force-push: %q, want main at %s and no %s", v0, first, tip)
	}
	// The force-push back: the digest of the refs is that of the first
	// state again, whose view was replaced; what is served is the refs'.
	if err := gittest.Git(f.repo, "update-ref", "refs/heads/main", tip); err != nil {
		t.Fatal(err)
	}
	if code, _, body := f.post(t, lsRefs, v2); code != http.StatusOK || body != bodies[0] {
		t.Fatalf("the listing after the force-push back: %d %q, want %q", code, body, bodies[0])
	}
	// The capabilities depend on the configuration, not the refs: they
	// are not made again for each state.
	if _, again := f.get(t, "version=2"); again != caps {
		t.Fatalf("v2 capabilities after the refs moved: %q, want %q", again, caps)
	}
	if answers, _ := gitserve.SharedRuns(f.h); answers != 3 {
		t.Fatalf("%d upload-pack runs, want 3: none for three states' listings, advertisements and capabilities", answers)
	}
}

// A want found reachable from the refs in one state is not taken as
// reachable in another: a force-push between two identical requests gets
// the second one refused. Within one state, the check runs once.
func TestAWantsCheckOfOneStateOfTheRefsIsNotUsedForAnother(t *testing.T) {
	f := newFixture(t, func(h *gitserve.Handler) { h.TipGrace = -1 })
	first := head(t, f)
	mid, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	tip, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(want string) (int, string) {
		code, _, body := f.post(t, v2Fetch("want "+want, "ofs-delta", "no-progress", "done"), v2)
		return code, body
	}
	for range 2 {
		if code, body := fetch(tip); code != http.StatusOK {
			t.Fatalf("want of main's tip: %d %q", code, body)
		}
		if code, body := fetch(mid); code != http.StatusOK {
			t.Fatalf("want of an ancestor of main: %d %q", code, body)
		}
	}
	// A served tip needs no look; the ancestor's reach is looked at once.
	if _, checks := gitserve.SharedRuns(f.h); checks != 1 {
		t.Fatalf("%d git runs checked four wants of one state, want 1", checks)
	}
	rewind(t, f, first)
	for _, want := range []string{tip, mid} {
		if code, body := fetch(want); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
			t.Fatalf("want of %s after the force-push took it away: %d %q, want 403 not our ref", want, code, body)
		}
	}
}

// A tip that a listing advertised is served a moment after a force-push
// took it away, from a pack that is then kept; after the prune drops it
// (the refs as they were), the identical request is refused, neither by a
// check nor by the kept pack of before.
func TestASharedCheckOrKeptPackDoesNotServeATipThatAPruneDropped(t *testing.T) {
	f := newFixture(t, cached(t, 1<<30, nil))
	first := head(t, f)
	old, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, body := f.post(t, lsRefs, v2); code != http.StatusOK || !strings.Contains(body, old) {
		t.Fatalf("ls-refs: %d %q, want %s listed", code, body, old)
	}
	rewind(t, f, first)
	body := v2Fetch("want "+old, "ofs-delta", "no-progress", "done")
	for i := range 2 {
		if code, _, resp := f.post(t, body, v2); code != http.StatusOK {
			t.Fatalf("fetch %d of a tip advertised a moment ago: %d %q", i, code, resp)
		}
	}
	if s := f.h.Cache.Stats(); s.Runs != 1 || s.Hits != 1 {
		t.Fatalf("two identical fetches: %+v, want one run and one hit of its kept pack", s)
	}
	for _, args := range [][]string{{"reflog", "expire", "--expire=now", "--all"}, {"repack", "-a", "-d", "-q"}, {"prune", "--expire=now"}} {
		if err := gittest.Git(f.repo, args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gittest.Output(f.repo, "cat-file", "-e", old); err == nil {
		t.Fatal("the prune left the old tip: the test proves nothing")
	}
	if code, _, resp := f.post(t, body, v2); code != http.StatusForbidden || !strings.Contains(resp, "not our ref") {
		t.Fatalf("the pruned tip: %d %q, want 403 not our ref", code, resp)
	}
}

// newestRefsChange is the time of the latest change of the repository's
// refs files and directories.
func newestRefsChange(t *testing.T, repo string) time.Time {
	var newest time.Time
	note := func(path string) {
		if fi, err := os.Lstat(path); err == nil && fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
	}
	for _, name := range []string{"HEAD", "packed-refs", "shallow", "config"} {
		note(filepath.Join(repo, name))
	}
	err := filepath.WalkDir(filepath.Join(repo, "refs"), func(path string, d fs.DirEntry, err error) error {
		note(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return newest
}

// Once the refs are older than the racy margin, a request stats them
// rather than read them, and a stat tells a force-push: the request after
// it reads the new refs, and is served from them.
func TestAStatOfTheRefsTellsAForcePushOnceItCanBeTrusted(t *testing.T) {
	f := newFixture(t, func(h *gitserve.Handler) { h.TipGrace = -1 })
	first := head(t, f)
	tip, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refs to be older than the racy margin", func() bool {
		return time.Since(newestRefsChange(t, f.repo)) > gitserve.RacyMargin+time.Second
	})
	for range 3 {
		if code, _, body := f.post(t, lsRefs, v2); code != http.StatusOK || !strings.Contains(body, tip+" refs/heads/main") {
			t.Fatalf("ls-refs: %d %q, want main at %s", code, body, tip)
		}
	}
	if reads := gitserve.RefsReads(f.h); reads != 1 {
		t.Fatalf("%d reads of the refs for three listings of refs older than the racy margin, want 1", reads)
	}
	rewind(t, f, first)
	if code, _, body := f.post(t, lsRefs, v2); code != http.StatusOK ||
		!strings.Contains(body, first+" refs/heads/main") || strings.Contains(body, tip) {
		t.Fatalf("the listing after a force-push: %d %q, want main at %s and no %s", code, body, first, tip)
	}
	if code, _, body := f.post(t, v2Fetch("want "+tip, "done"), v2); code != http.StatusForbidden {
		t.Fatalf("want of the tip that the force-push took away: %d %q, want 403", code, body)
	}
}
