package e2e

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// freeze makes the hostile node a frozen owner: asked for a check, it does
// ask its upstream (it sees the push), but keeps its old copy, and
// reports the repository checked and unchanged with the old copy's digest.
// That is what a volunteer whose view of the upstream is stale looks like
// from outside, whether it lies or its DNS names an old copy.
func (h *forger) freeze() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onCheck = func(key, taskID string) {
		h.mu.Lock()
		url := h.urls[key]
		h.mu.Unlock()
		if _, err := lsRemote(url); err != nil {
			h.t.Errorf("frozen node: ask the upstream: %v", err)
		}
		refs, err := h.git.LocalRefs(h.ctx, h.path(key))
		if err != nil {
			h.t.Errorf("frozen node: %v", err)
			return
		}
		res := &fleetv1.CheckResult{Key: key, CheckedAtMs: time.Now().UnixMilli(), Ok: true, Digest: refs.Digest(), DurationMs: 5}
		if taskID != "" {
			res.TaskIds = []string{taskID}
		}
		h.send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Results{Results: &fleetv1.Results{Results: []*fleetv1.CheckResult{res}}}})
	}
}

// verifiedRepo is what the public API says of one repository's freshness.
type verifiedRepo struct {
	Current    bool       `json:"current"`
	VerifiedAt *time.Time `json:"verified_at"`
	Staleness  float64    `json:"staleness_seconds"`
}

func repoFreshness(t *testing.T, f *fleet, key string) verifiedRepo {
	t.Helper()
	var r verifiedRepo
	if code := call(t, "GET", f.base+"/api/v1/repos/"+key, "", nil, &r); code != http.StatusOK {
		t.Fatalf("GET /api/v1/repos/%s: %d", key, code)
	}
	return r
}

// staleReportsOf is the count GET /api/v1/nodes shows for node id.
func staleReportsOf(t *testing.T, f *fleet, id uint32) uint64 {
	return nodeCount(t, f, id, "stale_reports")
}

// TestAFrozenOwnerDoesNotKeepThePublicOnOldRefs: the owner of the one
// repository keeps reporting it unchanged after a push. The webhook of the
// push makes the full node hold the owner to it: the owner's "unchanged"
// makes the full node ask the upstream itself, fetch the push from there,
// and count a stale report against the owner. No spot checks run
// (--spot-check-per-hour 0): the hint alone finds it. Then the same with
// the operator's fetch?wait=30s instead of a webhook.
func TestAFrozenOwnerDoesNotKeepThePublicOnOldRefs(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f, h := hostileFleet(t, false, "--webhook-secret", webhookSecret, "--spot-check-per-hour", "0")
	key := f.key(0)
	h.freeze()
	before := repoFreshness(t, f, key)
	if before.VerifiedAt == nil || !before.Current {
		t.Fatalf("after the first verified pull: verified_at %v, current %v; want set and current", before.VerifiedAt, before.Current)
	}
	// verified_at is kept to the second: let one pass, so that a new
	// verification shows.
	eventually(t, 30*time.Second, "a second after verified_at", func() error {
		if time.Now().Unix() <= before.VerifiedAt.Unix() {
			return fmt.Errorf("still %v", before.VerifiedAt)
		}
		return nil
	})
	frozen, err := gittest.RefsOf(h.path(key))
	if err != nil {
		t.Fatal(err)
	}

	tip, err := f.up.Commit(f.name(0), "main")
	if err != nil {
		t.Fatal(err)
	}
	if code := pushHook(t, f.base, f.up.RepoURL(f.name(0)), tip, "frozen-owner-1"); code != http.StatusAccepted {
		t.Fatalf("webhook: %d", code)
	}
	eventually(t, 3*time.Minute, "the push served by the full node", func() error { return publicLikeUpstream(f) })

	// Not through the owner: it still has the old copy.
	if now, err := gittest.RefsOf(h.path(key)); err != nil || !maps.Equal(now, frozen) {
		t.Fatalf("the frozen node's copy changed (%v): %v", err, now)
	}
	eventually(t, 30*time.Second, "the stale report counted against the owner", func() error {
		if n := staleReportsOf(t, f, h.id); n != 1 {
			return fmt.Errorf("stale_reports %d", n)
		}
		return nil
	})
	after := repoFreshness(t, f, key)
	if after.VerifiedAt == nil || !after.VerifiedAt.After(*before.VerifiedAt) || !after.Current {
		t.Fatalf("after the full node's own fetch: verified_at %v (before %v), current %v; want later, current",
			after.VerifiedAt, before.VerifiedAt, after.Current)
	}

	// The push delivered again: the owner, asked again, reports its old
	// copy again. The full node asks the upstream once more (verified_at
	// moves on), finds it served, and does not count the one push twice;
	// nor does it pull the owner's old copy back.
	eventually(t, 30*time.Second, "a second after verified_at", func() error {
		if time.Now().Unix() <= after.VerifiedAt.Unix() {
			return fmt.Errorf("still %v", after.VerifiedAt)
		}
		return nil
	})
	if code := pushHook(t, f.base, f.up.RepoURL(f.name(0)), tip, "frozen-owner-2"); code != http.StatusAccepted {
		t.Fatalf("second webhook of the same push: %d", code)
	}
	eventually(t, 30*time.Second, "the owner's repeated claim checked against the upstream", func() error {
		r := repoFreshness(t, f, key)
		if r.VerifiedAt == nil || !r.VerifiedAt.After(*after.VerifiedAt) || !r.Current {
			return fmt.Errorf("verified_at %v (before %v), current %v", r.VerifiedAt, after.VerifiedAt, r.Current)
		}
		return nil
	})
	if n := staleReportsOf(t, f, h.id); n != 1 {
		t.Fatalf("one push, reported stale again: stale_reports %d, want 1", n)
	}
	if err := publicLikeUpstream(f); err != nil {
		t.Fatalf("the public mirror went back to the owner's old refs: %v", err)
	}
	if c := f.procs["full"].count(refusedPull); c != 0 {
		t.Fatalf("the full node pulled the owner's old copy %d times", c)
	}

	// The scenario: a push, no webhook, and the operator's
	// on-demand check, waited for. The owner answers "unchanged"; the
	// answer is the full node's own, with the push.
	if n := staleReportsOf(t, f, h.id); n != 1 {
		t.Fatalf("stale_reports %d before the second push", n)
	}
	tip2, err := f.up.Commit(f.name(0), "main")
	if err != nil {
		t.Fatal(err)
	}
	var task struct {
		State   string            `json:"state"`
		NewRefs map[string]string `json:"new_refs"`
	}
	if code := call(t, "POST", f.base+"/api/v1/repos/"+key+"/fetch?wait=30s", apiToken, nil, &task); code != http.StatusOK {
		t.Fatalf("fetch?wait=30s: %d", code)
	}
	if task.State != "done" || task.NewRefs["refs/heads/main"] != tip2 {
		t.Fatalf("fetch?wait=30s: %s with main at %s, want done with the push %s", task.State, task.NewRefs["refs/heads/main"], tip2)
	}
	if err := publicLikeUpstream(f); err != nil {
		t.Fatalf("after the on-demand check: %v", err)
	}
	if r := repoFreshness(t, f, key); !r.Current || r.VerifiedAt == nil || !r.VerifiedAt.After(*after.VerifiedAt) {
		t.Fatalf("after the on-demand check: current %v, verified_at %v", r.Current, r.VerifiedAt)
	}
	// The operator's check bounds no push (it may have landed after the
	// owner's check): the owner is counted when, asked again after the
	// full node found the upstream ahead, it still answers with its old
	// copy.
	if code := call(t, "POST", f.base+"/api/v1/repos/"+key+"/fetch?wait=30s", apiToken, nil, &task); code != http.StatusOK || task.State != "done" {
		t.Fatalf("second fetch?wait=30s: %d, %s", code, task.State)
	}
	eventually(t, 30*time.Second, "the second push's stale report counted", func() error {
		if n := staleReportsOf(t, f, h.id); n != 2 {
			return fmt.Errorf("stale_reports %d", n)
		}
		return nil
	})

	resp, err := http.Get(f.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("gitfleet_node_stale_reports_total{node=\"%d\"} 2", h.id); !strings.Contains(string(metrics), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

// TestAForgeFeedHoldsAFrozenOwnerToAPush: the same frozen owner, with no
// webhook and no spot checks: a forge's change feed (a GitHub-like GraphQL
// server) tells the coordinator of the push, which asks the owner for a
// check and hints the full node; the owner's "unchanged" makes the full
// node fetch the push from the upstream itself and count a stale report.
func TestAForgeFeedHoldsAFrozenOwnerToAPush(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	f.seed([]int{0}, "one repository on a forge with a change feed")
	gh := &githubAPI{pushed: map[string]time.Time{}, token: "test-token-1"}
	gh.push(f.name(0), time.Now().Add(-time.Hour))
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	host := strings.TrimPrefix(f.up.URL, "http://")
	f.coordArgs = []string{"--forge", host + "=github,api=" + api.URL + "/api", "--forge-token", host + "=" + gh.token,
		"--forge-min-ask-interval", "1s"}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--capacity", "0",
		"--spot-check-per-hour", "0", "--hint-wait", "30s")
	h := startHostile(t, f)
	eventually(t, 90*time.Second, "the hostile node's honest copy served", func() error { return publicLikeUpstream(f) })
	key := f.key(0)
	h.freeze()
	frozen, err := gittest.RefsOf(h.path(key))
	if err != nil {
		t.Fatal(err)
	}

	tip, err := f.up.Commit(f.name(0), "main")
	if err != nil {
		t.Fatal(err)
	}
	gh.push(f.name(0), time.Now())
	eventually(t, 60*time.Second, "the push served by the full node", func() error { return publicLikeUpstream(f) })
	if now, err := gittest.RefsOf(h.path(key)); err != nil || !maps.Equal(now, frozen) {
		t.Fatalf("the frozen node's copy changed (%v): %v", err, now)
	}
	got, err := lsRemote(f.base + "/" + key + ".git")
	if err != nil || got["refs/heads/main"] != tip {
		t.Fatalf("served main %s (%v), want the push %s", got["refs/heads/main"], err, tip)
	}
	eventually(t, 60*time.Second, "the stale report counted against the owner", func() error {
		if n := staleReportsOf(t, f, h.id); n != 1 {
			return fmt.Errorf("stale_reports %d", n)
		}
		return nil
	})
	if r := repoFreshness(t, f, key); !r.Current || r.VerifiedAt == nil {
		t.Fatalf("after the full node's own fetch: current %v, verified_at %v", r.Current, r.VerifiedAt)
	}
	if gh.requests.Load() == 0 || f.procs["coordinator"].count("forge feed: a push newer than the last check") == 0 {
		t.Fatalf("the push did not come through the feed (%d requests)", gh.requests.Load())
	}
}
