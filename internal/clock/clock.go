// Package clock is the time source of gitfleet's logic. Rules about time
// (grace periods, backoff, schedules) take a Clock instead of calling
// time.Now, so that tests and simulators can run days in milliseconds.
//
// A Clock tells the time (Now) and makes what waits on it: After for one
// wait, NewTimer for a wait that may be stopped or moved, NewTicker for a
// period; Sleep waits on one until a context ends. A shell gets its Clock
// when it is built and makes the timers and tickers of its rules from it.
// Package time stays where time is real by nature: I/O deadlines and the
// pace of a connection, the age of files on disk, a watch of the disk
// while git runs, an etcd lease, how long a step took (for a log), and
// the command-line tools.
//
// Real is the wall clock. Fake moves only when Advance or Set is called
// (Drive calls Advance whenever something waits on the clock), and fires
// what is due then: a test drives the waits of the code under test
// instead of sleeping, and Timers tells it when that code waits. Timers
// and tickers of both follow the channel rules of package time since Go
// 1.23: after Stop or Reset returns, no value from before is received.
package clock

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has elapsed.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time on its channel every
	// d; d must be positive. A tick that the receiver is not ready for is
	// dropped, as with time.Ticker.
	NewTicker(d time.Duration) Ticker
}

// Timer is a single wait, as time.Timer.
type Timer interface {
	// C is the channel on which the timer sends the time.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped
	// it: false if the timer had already fired and its value was
	// received, or had been stopped.
	Stop() bool
	// Reset makes the timer fire once d has elapsed from now, dropping a
	// value not yet received. It reports whether the timer was active.
	Reset(d time.Duration) bool
}

// Ticker is a periodic wait, as time.Ticker.
type Ticker interface {
	// C is the channel on which the ticks are sent.
	C() <-chan time.Time
	// Stop turns the ticker off: no more ticks are sent.
	Stop()
	// Reset stops the ticker and starts it again with period d, the next
	// tick d from now; d must be positive.
	Reset(d time.Duration)
}

// Sleep waits d on clk, or until ctx ends; it returns ctx.Err() then,
// and nil once d has elapsed.
func Sleep(ctx context.Context, clk Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTimer is time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTicker is time.NewTicker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// Fake is a manual clock for tests and simulations. Time moves only when
// Advance or Set is called. The zero value is not usable: use NewFake.
type Fake struct {
	mu    sync.Mutex
	now   time.Time
	armed []*fakeTimer // timers and tickers waiting to fire
}

// fakeTimer is a Fake's timer (period 0) or ticker (period > 0).
type fakeTimer struct {
	f      *Fake
	ch     chan time.Time // one value buffered, as time's channels
	at     time.Time      // when it fires next, while armed
	period time.Duration
}

// NewFake returns a Fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that fires when the fake time reaches Now()+d.
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.NewTimer(d).C() }

// NewTimer returns a timer that fires when the fake time reaches Now()+d,
// at once if d <= 0.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armLocked(t, d)
	return t
}

// NewTicker returns a ticker that fires each time the fake time passes
// another d. Time moved by several periods at once makes one tick, as a
// receiver that is late for time.Ticker gets. It panics if d <= 0.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armLocked(t, d)
	return fakeTicker{t}
}

// Timers returns how many timers and tickers wait to fire: a test can wait
// until the code under test waits on the clock before it moves it.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed)
}

// Drive moves the fake time on by step whenever a timer or ticker waits to
// fire, until stop is closed, and returns then. The code under test runs
// as fast as the machine lets it and its waits take no wall time: the time
// it sees pass is the time it waited for, give or take a step, however
// late a busy machine runs its goroutines. A ticker that stays armed keeps
// the time moving: Drive is for code whose waits end.
func (f *Fake) Drive(step time.Duration, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if f.Timers() > 0 {
			f.Advance(step)
			runtime.Gosched()
			continue
		}
		time.Sleep(50 * time.Microsecond) // the code under test is at work
	}
}

// StartDriving runs Drive in a goroutine of its own until the returned
// stop is called; stop returns once Drive has.
func (f *Fake) StartDriving(step time.Duration) (stop func()) {
	quit, driven := make(chan struct{}), make(chan struct{})
	go func() {
		f.Drive(step, quit)
		close(driven)
	}()
	return func() {
		close(quit)
		<-driven
	}
}

// Advance moves the fake time forward by d and fires due timers.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the fake time to t (never backwards) and fires the timers and
// tickers that are due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t
	}
	kept := f.armed[:0]
	for _, ft := range f.armed {
		if ft.at.After(f.now) {
			kept = append(kept, ft)
			continue
		}
		select {
		case ft.ch <- f.now:
		default: // a tick not received yet: this one is dropped
		}
		if ft.period > 0 {
			for !ft.at.After(f.now) {
				ft.at = ft.at.Add(ft.period)
			}
			kept = append(kept, ft)
		}
	}
	clear(f.armed[len(kept):])
	f.armed = kept
}

// armLocked makes t fire d from now (at once if d <= 0 and t is a timer).
func (f *Fake) armLocked(t *fakeTimer, d time.Duration) {
	if d <= 0 && t.period == 0 {
		t.ch <- f.now
		return
	}
	t.at = f.now.Add(d)
	f.armed = append(f.armed, t)
}

// disarmLocked stops t and drops a value it sent that was not received;
// it reports whether either was there.
func (f *Fake) disarmLocked(t *fakeTimer) bool {
	pending := false
	if i := slices.Index(f.armed, t); i >= 0 {
		f.armed = slices.Delete(f.armed, i, i+1)
		pending = true
	}
	select {
	case <-t.ch:
		pending = true
	default:
	}
	return pending
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Stop is Timer.Stop.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.disarmLocked(t)
}

// Reset is Timer.Reset.
func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	pending := t.f.disarmLocked(t)
	t.f.armLocked(t, d)
	return pending
}

// fakeTicker is a Fake's ticker: a fakeTimer with a period.
type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time { return k.t.ch }

func (k fakeTicker) Stop() { k.t.Stop() }

func (k fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	f := k.t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disarmLocked(k.t)
	k.t.period = d
	f.armLocked(k.t, d)
}
