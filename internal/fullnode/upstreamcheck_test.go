package fullnode

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// upstreamRig is a full node (fake clock, real git) holding one
// repository of a real upstream on 127.0.0.1, owned by node 2 (that does
// not exist: its reports are fed to states by the test), verified at the
// start.
type upstreamRig struct {
	f   *Node
	clk *clock.Fake
	up  *gittest.Upstreams
	key string
	old string // the digest served at the start
}

const rigOwner = 2

func newUpstreamRig(t *testing.T, cfg Config) *upstreamRig {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("c", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	nk, _, err := repokey.Normalize(up.RepoURL("c"), repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	key := nk.String()
	clk := clock.NewFake(time.Unix(2e9, 0))
	cfg.Coordinators, cfg.DataDir, cfg.AllowPrivate = []string{"127.0.0.1:1"}, t.TempDir(), true
	f, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.n.TestHooks().Close)
	res, err := f.n.SyncUpstream(t.Context(), repokey.Key(key), up.RepoURL("c"))
	if err != nil {
		t.Fatal(err)
	}
	d := res.After.Digest()
	f.n.SetDigest(repokey.Key(key), d)
	r := &upstreamRig{f: f, clk: clk, up: up, key: key, old: d}
	r.report(d)
	f.setVerified(repokey.Key(key), clk.Now())
	return r
}

// report feeds the owner's report of a check now with digest.
func (r *upstreamRig) report(digest string) {
	r.f.states([]*fleetv1.RepoState{{Key: r.key, Url: r.up.RepoURL("c"), Owner: rigOwner, State: "ok", Digest: digest,
		LastCheckMs: r.clk.Now().UnixMilli()}})
}

func (r *upstreamRig) verifiedAt() time.Time {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	v, _ := r.f.view.Entry(repokey.Key(r.key))
	return fromUnixSeconds(v.VerifiedAt())
}

// runFresh runs the full node's freshLoop until the test ends.
func (r *upstreamRig) runFresh(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.f.freshLoop(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// advanceUntil moves the fake clock on by step until cond holds, and
// fails after a bound of real time (git runs in real time).
func (r *upstreamRig) advanceUntil(t *testing.T, step time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s (fake clock at %v)", what, r.clk.Now())
		}
		r.clk.Advance(step)
		time.Sleep(5 * time.Millisecond) // let the loop run; the condition is what is asserted
	}
}

func (r *upstreamRig) servesUpstream(t *testing.T) bool {
	want, err := r.up.Refs("c")
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.f.mirror.Refs(t.Context(), repokey.Key(r.key))
	return err == nil && maps.Equal(got.Refs, want)
}

// An owner that says nothing after a webhook: once --hint-wait has passed
// the full node asks the upstream, fetches the push itself and verifies;
// the owner is not counted until it reports the old copy after the push.
func TestASilentOwnerIsOvertakenAfterTheHintWaitAndCountedAtItsStaleReport(t *testing.T) {
	r := newUpstreamRig(t, Config{HintWait: 3 * time.Minute})
	r.clk.Advance(time.Hour)
	if _, err := r.up.Commit("c", "main"); err != nil {
		t.Fatal(err)
	}
	hinted := r.clk.Now()
	if err := r.f.changeHint(repokey.Key(r.key), hinted); err != nil {
		t.Fatal(err)
	}
	before := r.verifiedAt()
	r.runFresh(t)
	r.advanceUntil(t, 10*time.Second, "the push fetched from the upstream and verified", func() bool {
		return r.verifiedAt().After(before) && r.servesUpstream(t)
	})
	if at := r.verifiedAt(); at.Before(hinted.Add(3 * time.Minute).Truncate(time.Second)) {
		t.Fatalf("verified at %v: before the hint's wait ended (%v)", at, hinted.Add(3*time.Minute))
	}
	if n := r.f.staleReportCount(rigOwner); n != 0 {
		t.Fatalf("a silent owner counted %d stale reports", n)
	}
	r.clk.Advance(2 * time.Minute) // more than an owner's clock may be ahead
	r.report(r.old)                // the owner's check after the push: its old copy
	r.advanceUntil(t, time.Second, "the stale report counted", func() bool { return r.f.staleReportCount(rigOwner) == 1 })
	r.report(r.old)
	r.f.mu.Lock()
	pending := r.f.plan.IsPending(repokey.Key(r.key))
	r.f.mu.Unlock()
	if pending {
		t.Fatal("the owner's copy found behind is queued for a pull")
	}
}

// Spot checks find a frozen owner without any hint: the oldest verified_at
// is checked at --spot-check-per-hour, and the push it finds is fetched.
func TestASpotCheckFindsAPushTheOwnerNeverReported(t *testing.T) {
	r := newUpstreamRig(t, Config{SpotCheckPerHour: 60})
	if _, err := r.up.Commit("c", "main"); err != nil {
		t.Fatal(err)
	}
	before := r.verifiedAt()
	r.runFresh(t)
	r.advanceUntil(t, 10*time.Second, "the push found by a spot check and verified", func() bool {
		return r.verifiedAt().After(before) && r.servesUpstream(t)
	})
	r.clk.Advance(2 * time.Minute)
	r.report(r.old)
	r.advanceUntil(t, time.Second, "the stale report counted", func() bool { return r.f.staleReportCount(rigOwner) == 1 })
}

// verified_at survives a restart: it is kept in the node's store and given
// back when the coordinator sends the repository again.
func TestVerifiedAtSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(2e9, 0))
	open := func() *Node {
		f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: dir}}, slog.New(slog.NewTextHandler(io.Discard, nil)), clk)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	st := &fleetv1.RepoState{Key: "github.com/a/b", Url: "https://github.com/a/b", Owner: 2, State: "ok", Digest: oldRefs, LastCheckMs: 1}
	f := open()
	f.states([]*fleetv1.RepoState{st})
	f.setVerified(repokey.Key(st.Key), clk.Now())
	f.persistVerified(t.Context()) // as persistLoop does, and at the end
	f.n.TestHooks().Close()

	f = open()
	defer f.n.TestHooks().Close()
	if err := f.loadVerified(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.states([]*fleetv1.RepoState{st})
	f.mu.Lock()
	v, _ := f.view.Entry(repokey.Key(st.Key))
	stale := f.stale.Count(clk.Now().Add(time.Minute).UnixMilli())
	f.mu.Unlock()
	if got := strconv.FormatUint(uint64(v.VerifiedAt()), 10); got != strconv.FormatInt(clk.Now().Unix(), 10) {
		t.Fatalf("verified_at after a restart: %s, want %d", got, clk.Now().Unix())
	}
	if stale != 1 {
		t.Fatalf("the stale counter after a restart counts %d, want the one repository", stale)
	}
	// A repository that leaves the mirror leaves the store too.
	f.removed(context.Background(), []string{st.Key})
	f.persistVerified(t.Context())
	kept := 0
	if err := f.db.Scan(t.Context(), bucketUpstreamVerified, "", func(string, []byte) error { kept++; return nil }); err != nil {
		t.Fatal(err)
	}
	if kept != 0 {
		t.Fatalf("%d verified_at kept after the removal", kept)
	}
}
