package pullplan

import (
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

var t0 = time.Unix(1e9, 0)

// fullWait is a jitter source that draws the longest wait each time.
type fullWait struct{}

func (fullWait) Int64N(n int64) int64 { return n - 1 }

func newPlan() *Plan { return New(Config{HintWait: 3 * time.Minute, Jitter: fullWait{}}) }

// owner is the state of key as its owner (node 2) reports digest, the
// full node serving served.
func owner(key repokey.Key, digest, served string) State {
	return State{Key: key, Owner: 2, Digest: digest, Served: served}
}

// next picks at now and fails the test unless it is want ("": none).
func next(t *testing.T, p *Plan, now time.Time, want repokey.Key) {
	t.Helper()
	k, ok := p.Next(now)
	if want == "" && ok {
		t.Fatalf("at %v: picked %s, want none", now.Sub(t0), k)
	}
	if want != "" && (!ok || k != want) {
		t.Fatalf("at %v: picked %q %v, want %s", now.Sub(t0), k, ok, want)
	}
}

// A state of the owner's that differs from what is served is pulled;
// one that does not, one owned here, one without an owner or without a
// digest is not.
func TestAStateIsPulledWhenTheOwnersDigestDiffers(t *testing.T) {
	for _, c := range []struct {
		name string
		s    State
		want bool
	}{
		{"the owner's digest differs", owner("a", "d1", "d0"), true},
		{"first seen, nothing served", owner("a", "d1", ""), true},
		{"the owner's digest is served", owner("a", "d1", "d1"), false},
		{"owned here", State{Key: "a", Owner: 2, Own: true, Digest: "d1"}, false},
		{"no owner", State{Key: "a", Digest: "d1"}, false},
		{"nothing fetched by the owner", owner("a", "", "d0"), false},
		{"the network changed, the digest served", State{Key: "a", Owner: 2, Digest: "d1", Served: "d1", NetworkChanged: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPlan()
			p.Seen(c.s, t0)
			if p.IsPending("a") != c.want || p.Pending() != map[bool]int{true: 1}[c.want] {
				t.Fatalf("pending %v (%d), want %v", p.IsPending("a"), p.Pending(), c.want)
			}
		})
	}
}

// A failed pull waits out the backoff (2 s doubling to 30 s, the jitter
// drawn from the injected source) and is picked again at its end, not a
// tick before; a success forgets the failures.
func TestAFailedPullIsTriedAgainAfterTheBackoff(t *testing.T) {
	p := newPlan()
	p.Seen(owner("a", "d1", ""), t0)
	now := t0
	next(t, p, now, "a")
	for i, want := range []time.Duration{2, 4, 8, 16, 30, 30} {
		p.Ended("a", "d1", Failed, now)
		wait := want * time.Second
		if w := p.NextWake(now).Pull; !w.Equal(now.Add(wait)) {
			t.Fatalf("failure %d: next wake %v, want %v", i+1, w.Sub(now), wait)
		}
		next(t, p, now.Add(wait-time.Nanosecond), "")
		now = now.Add(wait)
		next(t, p, now, "a")
	}
	p.Ended("a", "d1", Pulled, now)
	if p.IsPending("a") || len(p.keys) != 0 {
		t.Fatalf("after a success: pending %v, %d keys kept", p.IsPending("a"), len(p.keys))
	}
	p.Seen(owner("a", "d2", "d1"), now)
	next(t, p, now, "a")
	p.Ended("a", "d2", Failed, now)
	next(t, p, now.Add(2*time.Second), "a") // from the base again
}

// The jitter comes from the injected source: half the wait at least.
func TestTheBackoffIsJitteredFromTheInjectedSource(t *testing.T) {
	p := New(Config{Jitter: noWait{}})
	p.Seen(owner("a", "d1", ""), t0)
	next(t, p, t0, "a")
	p.Ended("a", "d1", Failed, t0)
	next(t, p, t0.Add(time.Second-time.Nanosecond), "")
	next(t, p, t0.Add(time.Second), "a")
}

type noWait struct{}

func (noWait) Int64N(int64) int64 { return 0 }

// A new state from the owner while a pull runs is pulled again after it:
// at once after a success, after the backoff after a failure.
func TestANewStateWhilePullingIsPulledAgainAfter(t *testing.T) {
	for _, c := range []struct {
		outcome Outcome
		after   time.Duration // when it is picked again
	}{
		{Pulled, 0},
		{OverLimit, 0}, // d1 went over a limit; d2 is another digest
		{Failed, 2 * time.Second},
		{Stopped, 0},
	} {
		p := newPlan()
		p.Seen(owner("a", "d1", ""), t0)
		next(t, p, t0, "a")
		p.Seen(owner("a", "d2", ""), t0)
		next(t, p, t0, "") // not twice at once
		if p.Pending() != 1 || len(p.Pulling()) != 1 {
			t.Fatalf("%v: pending %d, pulling %v; want 1 and [a]", c.outcome, p.Pending(), p.Pulling())
		}
		p.Ended("a", "d1", c.outcome, t0)
		if c.after > 0 {
			next(t, p, t0.Add(c.after-time.Nanosecond), "")
		}
		next(t, p, t0.Add(c.after), "a")
	}
}

// A pull over a limit is not tried again on a timer, whatever the
// upstream fetch that followed it gave, only when the owner reports
// another digest; a plain failure backs off and is tried again.
func TestAPullOverALimitWaitsForAnotherDigest(t *testing.T) {
	for _, c := range []struct {
		name    string
		noted   bool    // NoteOverLimit during the pull (pullTooLarge)
		outcome Outcome // the pull's end
		retried bool    // the same digest is pulled again on a timer or a state
	}{
		{"over a limit", false, OverLimit, false},
		{"over --max-repo-size, the upstream fetch failed", true, Failed, false},
		{"over --max-repo-size, the upstream fetch worked", true, Pulled, false},
		{"a plain failure", false, Failed, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPlan()
			p.Seen(owner("a", "d1", "d0"), t0)
			next(t, p, t0, "a")
			if c.noted {
				p.NoteOverLimit("a", "d1")
			}
			p.Ended("a", "d1", c.outcome, t0)
			later := t0.Add(time.Hour)
			p.Seen(owner("a", "d1", "d0"), later) // the owner checks again
			if _, ok := p.Next(later); ok != c.retried {
				t.Fatalf("the same digest pulled again: %v, want %v", ok, c.retried)
			}
			if c.retried {
				return
			}
			p.Seen(owner("a", "d2", "d0"), later)
			next(t, p, later, "a")
			p.Ended("a", "d2", Pulled, later)
			p.Seen(owner("a", "d1", "d2"), later) // d1 again after d2: no longer refused
			next(t, p, later, "a")
		})
	}
}

// An on-demand pull (not picked by the plan) that went over a limit keeps
// the owner's digest from the queue too.
func TestAnOnDemandPullOverALimitKeepsTheDigestFromTheQueue(t *testing.T) {
	p := newPlan()
	p.NoteOverLimit("a", "d1")
	p.Seen(owner("a", "d1", "d0"), t0)
	next(t, p, t0, "")
	p.Seen(owner("a", "d2", "d0"), t0)
	next(t, p, t0, "a")
}

// Refused for disk while the disk is full, a key waits without retry (a
// new state does not queue it) until a measure below the mark releases
// it; refused while clones under way hold the room, it is tried again a
// second later.
func TestAPullRefusedForDiskWaitsForRoom(t *testing.T) {
	p := newPlan()
	p.Seen(owner("a", "d1", ""), t0)
	p.Disk(true)
	next(t, p, t0, "a")
	if !p.Refused("a", t0) || !p.DiskWaiting("a") || p.DiskWaitCount() != 1 {
		t.Fatal("refused while the disk is full: not waiting for room")
	}
	p.Seen(owner("a", "d2", ""), t0.Add(time.Hour))
	next(t, p, t0.Add(time.Hour), "")
	if got := p.Disk(true); len(got) != 0 {
		t.Fatalf("released %v while the disk is full", got)
	}
	if got := p.Disk(false); !slices.Equal(got, []repokey.Key{"a"}) || p.DiskWaiting("a") {
		t.Fatalf("released %v below the mark, want [a]", got)
	}
	p.Queue("a") // the shell queues what it pulls
	next(t, p, t0.Add(time.Hour), "a")
	if p.Refused("a", t0.Add(time.Hour)) {
		t.Fatal("refused below the mark: waits for room")
	}
	next(t, p, t0.Add(time.Hour+time.Second-time.Nanosecond), "")
	next(t, p, t0.Add(time.Hour+time.Second), "a")

	p.WaitDisk("own") // an own fetch refused
	if got := p.Disk(false); !slices.Equal(got, []repokey.Key{"own"}) {
		t.Fatalf("released %v, want the own key", got)
	}
}

// A key removed while it is pulled is dropped when the pull ends, whatever
// the outcome: not tried again, nothing kept; added back meanwhile, it is
// pulled again.
func TestAKeyRemovedWhilePullingIsDropped(t *testing.T) {
	for _, o := range []Outcome{Pulled, Failed, OverLimit, Stopped} {
		p := newPlan()
		p.Seen(owner("a", "d1", ""), t0)
		next(t, p, t0, "a")
		p.Seen(owner("a", "d2", ""), t0)
		p.Removed("a")
		if p.IsPending("a") || p.Pending() != 0 {
			t.Fatalf("%v: removed, still pending", o)
		}
		p.Ended("a", "d1", o, t0)
		if len(p.keys) != 0 || len(p.Pulling()) != 0 {
			t.Fatalf("%v: %d keys kept after the pull of a removed key", o, len(p.keys))
		}
		next(t, p, t0.Add(time.Hour), "")
	}
	p := newPlan()
	p.Seen(owner("a", "d1", ""), t0)
	next(t, p, t0, "a")
	p.Removed("a")
	p.Seen(owner("a", "d2", ""), t0) // added back
	p.Ended("a", "d1", Pulled, t0)
	next(t, p, t0, "a")
}

// A key the node owns and fetched itself is not pulled.
func TestAnOwnSyncDropsAQueuedPull(t *testing.T) {
	p := newPlan()
	p.Queue("a")
	p.OwnSynced("a", t0)
	next(t, p, t0, "")
	if len(p.keys) != 0 {
		t.Fatal("an own sync kept the key")
	}
}

// Picks come due first, then in the order the keys came.
func TestPicksComeByDueTimeThenArrival(t *testing.T) {
	p := newPlan()
	for _, k := range []repokey.Key{"a", "b", "c", "d"} {
		p.Seen(owner(k, "d1", ""), t0)
	}
	next(t, p, t0, "a")
	next(t, p, t0, "b")
	p.Ended("a", "d1", Failed, t0) // due at 2 s
	p.Ended("b", "d1", Pulled, t0)
	p.Queue("b")
	if w := p.NextWake(t0); !w.Pull.Equal(t0) {
		t.Fatalf("next wake %v, want now", w.Pull)
	}
	for _, want := range []repokey.Key{"c", "d", "b", ""} {
		next(t, p, t0, want)
	}
	if w := p.NextWake(t0); !w.Pull.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("next wake %v, want a's retry at 2 s", w.Pull.Sub(t0))
	}
	next(t, p, t0.Add(2*time.Second), "a")
	if w := p.NextWake(t0); !w.Pull.IsZero() || !w.Check.IsZero() {
		t.Fatalf("next wake %+v with nothing queued", w)
	}
}

// An owner that reports its old copy after a push the full node fetched
// itself is counted stale once, at the next Tick, and that copy is not
// pulled; one that says "unchanged" before the full node asked makes the
// upstream asked now; one silent past the hint's wait makes it asked
// then.
func TestHintsAndStaleReportsComeOutAtTheTick(t *testing.T) {
	p := newPlan()
	const key, old, fresh = "h/a", "d0", "d1"
	if act := p.Hear(key, t0, t0, t0.Add(-time.Hour), old, 2); act != None {
		t.Fatalf("a push heard: %v", act)
	}
	if w := p.NextWake(t0).Check; !w.Equal(t0.Add(3 * time.Minute)) {
		t.Fatalf("check due %v, want at the end of the wait", w.Sub(t0))
	}
	if r := p.Tick(t0.Add(3*time.Minute - time.Second)); len(r.Check) != 0 {
		t.Fatalf("asked %v before the wait ended", r.Check)
	}
	if r := p.Tick(t0.Add(3 * time.Minute)); !slices.Equal(r.Check, []repokey.Key{key}) {
		t.Fatalf("asked %v at the end of the wait, want [%s]", r.Check, key)
	}
	at := t0.Add(4 * time.Minute)
	p.Ensure(key, at, old, 2)
	if act, _ := p.Checked(key, at, true, fresh); act != None {
		t.Fatalf("the upstream found ahead, no claim yet: %v", act)
	}
	claim := State{Key: key, Owner: 2, Digest: old, Served: fresh, Checked: at.Add(2 * time.Minute)}
	if act := p.Seen(claim, at.Add(2*time.Minute)); act != CountStale {
		t.Fatalf("the owner's old copy after the fetch: %v, want CountStale", act)
	}
	p.Seen(claim, at.Add(3*time.Minute)) // the same claim again
	if p.IsPending(key) {
		t.Fatal("the owner's copy found behind is queued for a pull")
	}
	r := p.Tick(at.Add(3 * time.Minute))
	if !slices.Equal(r.Stale, []StaleReport{{key, 2}}) {
		t.Fatalf("stale reports %v, want one against node 2", r.Stale)
	}
	if r := p.Tick(at.Add(4 * time.Minute)); len(r.Stale) != 0 {
		t.Fatalf("stale reports %v counted twice", r.Stale)
	}

	// A claim before the full node asked: the upstream is asked now.
	p = newPlan()
	p.Hear(key, t0, t0, time.Time{}, old, 2)
	claim = State{Key: key, Owner: 2, Digest: old, Served: old, Checked: t0.Add(2 * time.Minute)}
	if act := p.Seen(claim, t0.Add(2*time.Minute)); act != CheckNow {
		t.Fatalf("the owner claims unchanged after the push: %v, want CheckNow", act)
	}
	if r := p.Tick(t0.Add(2 * time.Minute)); !slices.Equal(r.Check, []repokey.Key{key}) || len(r.Stale) != 0 {
		t.Fatalf("tick %+v, want the upstream asked, nothing counted", r)
	}
}

// A repository the full tier places on other full nodes is not pulled
// here: a new digest of its owner's queues nothing, a pull queued is let
// go, one under way ends unheeded (no retry after its failure), and a
// placement back here pulls it again.
func TestARepositoryPlacedElsewhereIsNotPulled(t *testing.T) {
	p := newPlan()
	elsewhere := owner("a", "d1", "")
	elsewhere.Elsewhere = true
	p.Seen(elsewhere, t0)
	if p.IsPending("a") || p.Pending() != 0 {
		t.Fatalf("placed elsewhere: pending %v (%d), want none", p.IsPending("a"), p.Pending())
	}

	p.Seen(owner("a", "d1", ""), t0) // placed here
	if !p.IsPending("a") {
		t.Fatal("placed here: not pending")
	}
	p.Seen(elsewhere, t0)
	if p.IsPending("a") || p.Pending() != 0 {
		t.Fatalf("queued, then placed elsewhere: pending %v (%d), want none", p.IsPending("a"), p.Pending())
	}
	next(t, p, t0, "")

	p.Seen(owner("a", "d1", ""), t0)
	next(t, p, t0, "a")
	p.Seen(elsewhere, t0)
	p.Ended("a", "d1", Failed, t0)
	if w := p.NextWake(t0).Pull; !w.IsZero() {
		t.Fatalf("a failed pull of a repository placed elsewhere wakes at %v, want never", w.Sub(t0))
	}
	next(t, p, t0.Add(time.Hour), "")

	p.Seen(owner("a", "d2", ""), t0.Add(time.Hour))
	next(t, p, t0.Add(time.Hour), "a")
}
