package gitserve_test

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// rewind moves main of the fixture's repository back to its first commit,
// as a mirror does when it takes a force-push: the old tip stays on disk
// until the prune, but no ref reaches it.
func rewind(t *testing.T, f *fixture, to string) {
	t.Helper()
	if err := gittest.Git(f.repo, "update-ref", "refs/heads/main", to); err != nil {
		t.Fatal(err)
	}
}

var lsRefs = []byte(pkt("command=ls-refs\n") + "0001" + pkt("peel\n") + pkt("symrefs\n") + pkt("ref-prefix refs/heads/\n") + "0000")

// A clone lists the refs, then asks for them in a second request. When a
// force-push lands in between, it still gets the tips it was told of.
func TestACloneRacingAForcePushGetsTheTipItWasAdvertised(t *testing.T) {
	t.Run("alone", func(t *testing.T) { cloneRacingAForcePush(t, newFixture(t, nil)) })
	t.Run("through the pack cache", func(t *testing.T) { cloneRacingAForcePush(t, newFixture(t, cached(t, 1<<20, nil))) })
}

func cloneRacingAForcePush(t *testing.T, f *fixture) {
	first := head(t, f)
	old, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	// The force-push lands as the clone's fetch arrives, after its listing.
	var once sync.Once
	f.mu.Lock()
	f.onPost = func(body []byte) {
		if bytes.Contains(body, []byte("command=fetch")) { // git writes it without a newline
			once.Do(func() { rewind(t, f, first) })
		}
	}
	f.mu.Unlock()
	dir := filepath.Join(t.TempDir(), "c")
	if out, err := git(t, "", "-c", "protocol.version=2", "clone", "-q", "--no-checkout", f.url, dir); err != nil {
		t.Fatalf("clone racing a force-push: %v %s", err, out)
	}
	if got, _ := git(t, dir, "rev-parse", "origin/main"); strings.TrimSpace(got) != old {
		t.Fatalf("the clone has main at %q, want the tip it was advertised, %s", got, old)
	}
	if now := head(t, f); now != first {
		t.Fatalf("the force-push did not land during the clone: main is %s", now)
	}
}

// The grace is short, keyed by what was advertised, and no stronger than
// the disk: a tip older than the grace, or pruned, is "not our ref".
func TestARecentTipIsServedOnlyWithinTheGraceAndWhileOnDisk(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	f := newFixture(t, func(h *gitserve.Handler) { h.Clock = clk })
	first := head(t, f)
	listThenRewind := func() string {
		tip, err := f.up.Commit("r", "main")
		if err != nil {
			t.Fatal(err)
		}
		if code, _, body := f.post(t, lsRefs, v2); code != http.StatusOK || !strings.Contains(body, tip) {
			t.Fatalf("ls-refs: %d %q, want %s listed", code, body, tip)
		}
		rewind(t, f, first)
		return tip
	}
	fetch := func(tip string) (int, string) {
		code, _, body := f.post(t, v2Fetch("want "+tip, "ofs-delta", "no-progress", "done"), v2)
		return code, body
	}

	old := listThenRewind()
	clk.Advance(gitserve.DefaultTipGrace - time.Second)
	if code, body := fetch(old); code != http.StatusOK {
		t.Fatalf("a tip advertised %v ago: %d %q, want 200", gitserve.DefaultTipGrace-time.Second, code, body)
	}
	// Protocol v0's upload-pack refuses an unreachable want itself (as
	// behind git http-backend): no grace there.
	if code, _, body := f.post(t, []byte(pkt("want "+old+" ofs-delta\n")+"0000"+pkt("done\n")), nil); code != http.StatusForbidden {
		t.Errorf("protocol v0 want of a tip no longer served: %d %q, want 403", code, body)
	}
	clk.Advance(2 * time.Second)
	if code, body := fetch(old); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
		t.Fatalf("a tip advertised %v ago: %d %q, want 403 not our ref", gitserve.DefaultTipGrace+time.Second, code, body)
	}

	pruned := listThenRewind()
	if err := gittest.Git(f.repo, "repack", "-a", "-d", "-q"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.repo, "prune", "--expire=now"); err != nil {
		t.Fatal(err)
	}
	if code, body := fetch(pruned); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
		t.Fatalf("a pruned tip within the grace: %d %q, want 403 not our ref", code, body)
	}
}

// With the grace turned off, the race is lost as before.
func TestANegativeTipGraceServesNoOldTip(t *testing.T) {
	f := newFixture(t, func(h *gitserve.Handler) { h.TipGrace = -1 })
	first := head(t, f)
	old, err := f.up.Commit("r", "main")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := f.post(t, lsRefs, v2); code != http.StatusOK {
		t.Fatal(code)
	}
	rewind(t, f, first)
	if code, _, body := f.post(t, v2Fetch("want "+old, "done"), v2); code != http.StatusForbidden {
		t.Fatalf("no grace: %d %q, want 403", code, body)
	}
}
