package gitserve

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// timerClock is a fake clock that tells of each timer set: a queue sets
// one as a request starts to wait, so the test knows it waits without
// polling.
type timerClock struct {
	*clock.Fake
	timers chan time.Duration
}

func newTimerClock() timerClock {
	return timerClock{clock.NewFake(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)), make(chan time.Duration, 64)}
}

func (c timerClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	c.timers <- d
	return ch
}

// waited is a timed wait's end: the request's release, or why it got none.
type waited struct {
	name    string
	release func()
	err     error
}

// waitIn starts acquire in a goroutine and returns once the request waits
// (its timer is set), with the channel of its end (ch, or a new one).
func waitIn(t *testing.T, clk timerClock, name string, acquire func() (func(), error), ch ...chan waited) <-chan waited {
	t.Helper()
	if len(ch) == 0 {
		ch = append(ch, make(chan waited, 1))
	}
	end := ch[0]
	go func() {
		release, err := acquire()
		end <- waited{name, release, err}
	}()
	select {
	case <-clk.timers:
	case w := <-end:
		t.Fatalf("%s did not wait: %v", name, w.err)
	}
	return end
}

func granted(t *testing.T, ch <-chan waited) func() {
	t.Helper()
	w := <-ch
	if w.err != nil {
		t.Fatalf("%s: %v, want its turn", w.name, w.err)
	}
	return w.release
}

func refusedWith(t *testing.T, ch <-chan waited, status int) {
	t.Helper()
	w := <-ch
	var busy *busyError
	if !errors.As(w.err, &busy) || busy.status != status {
		t.Fatalf("%s: %v, want a refusal with status %d", w.name, w.err, status)
	}
}

func newShares(clk clock.Clock, share, maxLen int) *clientShares {
	return &clientShares{share: share, waitQueue: waitQueue{clk: clk, q: fairQueue{maxLen: maxLen}}}
}

func TestAClientOverItsShareWaitsItsTurnOldestFirst(t *testing.T) {
	clk := newTimerClock()
	s := newShares(clk, 2, 10)
	until := clk.Now().Add(time.Minute)
	ctx := context.Background()
	var held []func()
	for range 2 {
		release, err := s.acquire(ctx, "a", 0, until)
		if err != nil {
			t.Fatalf("within the share: %v", err)
		}
		held = append(held, release)
	}
	a3 := waitIn(t, clk, "a3", func() (func(), error) { return s.acquire(ctx, "a", 0, until) })
	a4 := waitIn(t, clk, "a4", func() (func(), error) { return s.acquire(ctx, "a", 0, until) })
	// Another address has its own share.
	if release, err := s.acquire(ctx, "b", 0, until); err != nil {
		t.Fatalf("another client while a waits: %v", err)
	} else {
		release()
	}
	held[0]()
	held[0]() // a release is done once
	r3 := granted(t, a3)
	if c := s.snapshot(); c.Waiting != 1 || c.Served != 1 {
		t.Fatalf("after one release: %+v, want a4 waiting and a3 served", c)
	}
	held[1]()
	r4 := granted(t, a4)
	r3()
	r4()
	if c := s.snapshot(); c.Queued != 2 || c.Served != 2 || c.TimedOut+c.Left+c.Bumped+c.Refused != 0 {
		t.Fatalf("counts %+v, want 2 queued and served", c)
	}
	if len(s.serving) != 0 {
		t.Fatalf("shares still held after every release: %v", s.serving)
	}
}

func TestPastItsWaitARequestOverItsShareIsRefusedWith429(t *testing.T) {
	clk := newTimerClock()
	s := newShares(clk, 1, 10)
	ctx := context.Background()
	release, err := s.acquire(ctx, "a", 0, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	until := clk.Now().Add(time.Minute)
	late := waitIn(t, clk, "a2", func() (func(), error) { return s.acquire(ctx, "a", 0, until) })
	clk.Advance(time.Minute)
	refusedWith(t, late, 429)
	c := s.snapshot()
	if c.TimedOut != 1 || c.Waiting != 0 || c.Waits.Count != 1 || c.Waits.Sum != time.Minute {
		t.Fatalf("counts %+v, want one wait of a minute, timed out", c)
	}
	// No wait left: refused at once.
	if _, err := s.acquire(ctx, "a", 0, clk.Now()); !errors.Is(err, errClientFull) {
		t.Fatalf("a request with no wait left: %v, want %v", err, errClientFull)
	}
	release()
	if r, err := s.acquire(ctx, "a", 0, clk.Now()); err != nil {
		t.Fatalf("the share back: %v", err)
	} else {
		r()
	}
}

func TestAWaiterWhoseContextEndsLeavesTheQueueAtOnce(t *testing.T) {
	clk := newTimerClock()
	s := newShares(clk, 1, 10)
	until := clk.Now().Add(time.Minute)
	release, err := s.acquire(context.Background(), "a", 0, until)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := waitIn(t, clk, "a2", func() (func(), error) { return s.acquire(ctx, "a", 0, until) })
	next := waitIn(t, clk, "a3", func() (func(), error) { return s.acquire(context.Background(), "a", 0, until) })
	cancel()
	if w := <-gone; !errors.Is(w.err, context.Canceled) {
		t.Fatalf("a request whose client went away: %v", w.err)
	}
	if c := s.snapshot(); c.Left != 1 || c.Waiting != 1 {
		t.Fatalf("counts %+v, want one left and one waiting", c)
	}
	release()
	granted(t, next)()
}

func TestAFullQueueTakesAPlaceFromTheLongestLine(t *testing.T) {
	clk := newTimerClock()
	s := newShares(clk, 1, 2)
	until := clk.Now().Add(time.Minute)
	ctx := context.Background()
	for _, c := range []string{"a", "b"} {
		if _, err := s.acquire(ctx, c, 0, until); err != nil {
			t.Fatal(err)
		}
	}
	waitIn(t, clk, "a2", func() (func(), error) { return s.acquire(ctx, "a", 0, until) })
	a3 := waitIn(t, clk, "a3", func() (func(), error) { return s.acquire(ctx, "a", 0, until) })
	waitIn(t, clk, "b2", func() (func(), error) { return s.acquire(ctx, "b", 0, until) })
	refusedWith(t, a3, 429)
	if _, err := s.acquire(ctx, "a", 0, until); !errors.Is(err, errClientFull) {
		t.Fatalf("a's third waiting request in a full queue: %v, want %v", err, errClientFull)
	}
	if c := s.snapshot(); c.Bumped != 1 || c.Refused != 1 || c.Waiting != 2 {
		t.Fatalf("counts %+v, want one bumped, one refused, two waiting", c)
	}
	clk.Advance(time.Minute) // the rest time out
}

func TestTheRunQueueTakesClientsInTurn(t *testing.T) {
	clk := newTimerClock()
	s := &runSlots{global: 1, wait: time.Minute, waitQueue: waitQueue{clk: clk, q: fairQueue{maxLen: 10}}}
	until := clk.Now().Add(time.Minute)
	release, err := s.acquire(withTurn(context.Background(), turn{"a", until}), "r")
	if err != nil {
		t.Fatal(err)
	}
	ends := make(chan waited, 4)
	for _, w := range []struct{ name, client string }{{"a2", "a"}, {"a3", "a"}, {"a4", "a"}, {"b1", "b"}} {
		ctx := withTurn(context.Background(), turn{w.client, until})
		waitIn(t, clk, w.name, func() (func(), error) { return s.acquire(ctx, "r") }, ends)
	}
	var order []string
	for range 4 {
		release() // one slot: the next run has it once this one ends
		w := <-ends
		if w.err != nil {
			t.Fatalf("%s: %v, want its slot", w.name, w.err)
		}
		order, release = append(order, w.name), w.release
	}
	release()
	if got, want := order, []string{"a2", "b1", "a3", "a4"}; !slices.Equal(got, want) {
		t.Fatalf("slots went to %v, want %v: b's one run not behind a's three", got, want)
	}
	if st := s.stats(); st.Running != 0 || st.Served != 4 {
		t.Fatalf("stats %+v, want nothing running, 4 served", st)
	}
}

func TestARunWaitsOnlyWhatIsLeftOfItsTurn(t *testing.T) {
	clk := newTimerClock()
	s := &runSlots{global: 1, wait: time.Minute, waitQueue: waitQueue{clk: clk, q: fairQueue{maxLen: 10}}}
	release, err := s.acquire(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx := withTurn(context.Background(), turn{"a", clk.Now().Add(time.Minute)})
	clk.Advance(40 * time.Second) // spent in its client's line
	end := make(chan waited, 1)
	go func() {
		r, err := s.acquire(ctx, "r")
		end <- waited{"a", r, err}
	}()
	if d := <-clk.timers; d != 20*time.Second {
		t.Fatalf("a run waits for %v, want the 20s left of its turn", d)
	}
	clk.Advance(20 * time.Second)
	refusedWith(t, end, 503)
	clk.Advance(time.Minute)
	if _, err := s.acquire(ctx, "r"); !errors.Is(err, errBusy) {
		t.Fatalf("a run past its turn's end: %v, want %v at once", err, errBusy)
	}
}
