package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

var (
	_ Clock = Real{}
	_ Clock = (*Fake)(nil)
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// received returns the value waiting on ch, if any, without blocking.
func received(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeAfterFiresWhenTheTimeComesAndNotBefore(t *testing.T) {
	f := NewFake(t0)
	ch := f.After(time.Minute)
	f.Advance(59 * time.Second)
	if v, ok := received(ch); ok {
		t.Fatalf("fired at %v, a second early", v)
	}
	f.Advance(time.Second)
	if v, ok := received(ch); !ok || !v.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after a minute: %v %v, want the time of firing", v, ok)
	}
	if _, ok := <-f.After(0); !ok {
		t.Fatal("After(0) did not fire at once")
	}
	if n := f.Timers(); n != 0 {
		t.Errorf("%d timers left armed", n)
	}
}

func TestFakeNeverGoesBackwards(t *testing.T) {
	f := NewFake(t0)
	ch := f.After(time.Second)
	f.Set(t0.Add(-time.Hour))
	if !f.Now().Equal(t0) {
		t.Fatalf("Set to the past moved the clock to %v", f.Now())
	}
	if _, ok := received(ch); ok {
		t.Fatal("a timer fired when the clock was set back")
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	t.Run("stopped before it fires, it never fires", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Minute)
		if !tm.Stop() {
			t.Fatal("Stop of an armed timer reported false")
		}
		f.Advance(time.Hour)
		if v, ok := received(tm.C()); ok {
			t.Fatalf("a stopped timer fired at %v", v)
		}
		if tm.Stop() {
			t.Fatal("a second Stop reported true")
		}
	})
	t.Run("stopped after it fired, its value is dropped", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Minute)
		f.Advance(time.Minute)
		if !tm.Stop() {
			t.Fatal("Stop of a timer whose value was not received reported false")
		}
		if v, ok := received(tm.C()); ok {
			t.Fatalf("received %v after Stop", v)
		}
	})
	t.Run("stopped after its value was received, Stop reports false", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Minute)
		f.Advance(time.Minute)
		<-tm.C()
		if tm.Stop() {
			t.Fatal("Stop of a timer that fired and was received reported true")
		}
	})
	t.Run("reset while armed, it fires at the new time only", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Minute)
		f.Advance(30 * time.Second)
		if !tm.Reset(time.Minute) {
			t.Fatal("Reset of an armed timer reported false")
		}
		f.Advance(30 * time.Second) // the old time
		if v, ok := received(tm.C()); ok {
			t.Fatalf("fired at the time it had before Reset: %v", v)
		}
		f.Advance(30 * time.Second)
		if v, ok := received(tm.C()); !ok || !v.Equal(t0.Add(90*time.Second)) {
			t.Fatalf("after Reset: %v %v, want a firing at %v", v, ok, t0.Add(90*time.Second))
		}
	})
	t.Run("reset after it fired, the stale value is dropped and it fires again", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Second)
		f.Advance(time.Second)
		if !tm.Reset(time.Minute) {
			t.Fatal("Reset of a timer whose value was not received reported false")
		}
		if v, ok := received(tm.C()); ok {
			t.Fatalf("received the stale %v after Reset", v)
		}
		f.Advance(time.Minute)
		if _, ok := received(tm.C()); !ok {
			t.Fatal("a timer reset after it fired did not fire again")
		}
		if tm.Reset(time.Minute) {
			t.Fatal("Reset of a timer that fired and was received reported true")
		}
	})
	t.Run("reset to zero fires at once", func(t *testing.T) {
		f := NewFake(t0)
		tm := f.NewTimer(time.Hour)
		tm.Reset(0)
		if _, ok := received(tm.C()); !ok {
			t.Fatal("Reset(0) did not fire at once")
		}
		if n := f.Timers(); n != 0 {
			t.Errorf("%d timers armed, want 0", n)
		}
	})
}

func TestFakeFiresEveryDueTimerInOneMove(t *testing.T) {
	f := NewFake(t0)
	early, late, later := f.NewTimer(time.Minute), f.NewTimer(2*time.Minute), f.NewTimer(time.Hour)
	f.Advance(2 * time.Minute)
	for name, tm := range map[string]Timer{"early": early, "late": late} {
		if v, ok := received(tm.C()); !ok || !v.Equal(t0.Add(2*time.Minute)) {
			t.Errorf("%s: %v %v, want a firing at the new time", name, v, ok)
		}
	}
	if v, ok := received(later.C()); ok {
		t.Errorf("a timer due in an hour fired at %v", v)
	}
	if n := f.Timers(); n != 1 {
		t.Errorf("%d timers armed, want 1", n)
	}
}

func TestFakeTickerTicksEachPeriod(t *testing.T) {
	f := NewFake(t0)
	tk := f.NewTicker(time.Minute)
	defer tk.Stop()
	for i := 1; i <= 5; i++ {
		f.Advance(59 * time.Second)
		if v, ok := received(tk.C()); ok {
			t.Fatalf("period %d: ticked at %v, a second early", i, v)
		}
		f.Advance(time.Second)
		want := t0.Add(time.Duration(i) * time.Minute)
		if v, ok := received(tk.C()); !ok || !v.Equal(want) {
			t.Fatalf("period %d: %v %v, want a tick at %v", i, v, ok, want)
		}
	}
	if n := f.Timers(); n != 1 {
		t.Errorf("%d timers armed, want the ticker", n)
	}
}

func TestFakeTickerDropsTicksNobodyReceives(t *testing.T) {
	f := NewFake(t0)
	tk := f.NewTicker(time.Minute)
	defer tk.Stop()
	f.Advance(3*time.Minute + 30*time.Second) // three periods at once
	if _, ok := received(tk.C()); !ok {
		t.Fatal("no tick after three periods")
	}
	if v, ok := received(tk.C()); ok {
		t.Fatalf("a second tick %v for one move of the clock", v)
	}
	f.Advance(29 * time.Second)
	if v, ok := received(tk.C()); ok {
		t.Fatalf("ticked at %v, before the fourth period", v)
	}
	f.Advance(time.Second) // the fourth period: the ticker keeps its phase
	if v, ok := received(tk.C()); !ok || !v.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("fourth period: %v %v, want a tick at %v", v, ok, t0.Add(4*time.Minute))
	}
	// Unreceived, a tick waits; the next is dropped rather than queued.
	f.Advance(time.Minute)
	f.Advance(time.Minute)
	if v, ok := received(tk.C()); !ok || !v.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("%v %v, want the fifth period's tick, kept", v, ok)
	}
	if v, ok := received(tk.C()); ok {
		t.Fatalf("the sixth period's tick %v was queued behind an unreceived one", v)
	}
}

func TestFakeTickerStopAndReset(t *testing.T) {
	f := NewFake(t0)
	tk := f.NewTicker(time.Minute)
	f.Advance(time.Minute)
	tk.Reset(10 * time.Minute)
	if v, ok := received(tk.C()); ok {
		t.Fatalf("received the stale tick %v after Reset", v)
	}
	f.Advance(9 * time.Minute)
	if v, ok := received(tk.C()); ok {
		t.Fatalf("ticked at %v on the old period", v)
	}
	for i := 1; i <= 3; i++ {
		f.Advance(time.Minute)
		if _, ok := received(tk.C()); !ok {
			t.Fatalf("no tick %d on the new period", i)
		}
		f.Advance(9 * time.Minute)
	}
	f.Advance(time.Minute)
	tk.Stop()
	if v, ok := received(tk.C()); ok {
		t.Fatalf("received %v after Stop", v)
	}
	f.Advance(time.Hour)
	if v, ok := received(tk.C()); ok {
		t.Fatalf("a stopped ticker ticked at %v", v)
	}
	if n := f.Timers(); n != 0 {
		t.Errorf("%d timers armed after Stop", n)
	}
	tk.Reset(time.Second) // a stopped ticker starts again
	f.Advance(time.Second)
	if _, ok := received(tk.C()); !ok {
		t.Fatal("a ticker reset after Stop did not tick")
	}
}

func TestTickersRefuseANonPositivePeriod(t *testing.T) {
	for name, f := range map[string]func(){
		"Fake.NewTicker(0)":    func() { NewFake(t0).NewTicker(0) },
		"Fake Ticker.Reset(0)": func() { NewFake(t0).NewTicker(time.Second).Reset(0) },
		"Real.NewTicker(0)":    func() { Real{}.NewTicker(0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestSleep(t *testing.T) {
	f := NewFake(t0)
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Minute) }()
	waitTimers(t, f, 1)
	f.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("Sleep: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- Sleep(ctx, f, time.Minute) }()
	waitTimers(t, f, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with its context cancelled: %v, want context.Canceled", err)
	}
	if n := f.Timers(); n != 0 {
		t.Errorf("a cancelled Sleep left %d timers armed", n)
	}
}

// waitTimers waits until n timers are armed on f; the deadline only
// bounds a failure.
func waitTimers(t *testing.T, f *Fake, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for f.Timers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers armed, want %d", f.Timers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDriveRunsWaitsOnFakeTime: code that waits three times a second on a
// Fake that Drive moves (StartDriving) sees three seconds pass, give or
// take a step a wait, and Drive returns once told to stop.
func TestDriveRunsWaitsOnFakeTime(t *testing.T) {
	f := NewFake(t0)
	const step = 10 * time.Millisecond
	stop := f.StartDriving(step)
	for range 3 {
		if err := Sleep(context.Background(), f, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if took := f.Now().Sub(t0); took < 3*time.Second || took >= 3*time.Second+3*step {
		t.Errorf("three waits of a second took %v of the fake time, want 3s and less than a step a wait more", took)
	}
}

func TestRealTimersAndTickers(t *testing.T) {
	var c Clock = Real{}
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() || tm.Stop() {
		t.Error("Stop of an armed real timer: want true, then false")
	}
	tm.Reset(0)
	<-tm.C()
	if tm.Stop() {
		t.Error("Stop of a real timer that fired and was received reported true")
	}
	tk := c.NewTicker(time.Millisecond)
	for range 3 {
		<-tk.C()
	}
	tk.Reset(time.Hour)
	tk.Stop()
	if v, ok := received(tk.C()); ok {
		t.Errorf("received %v after Stop", v)
	}
	<-c.After(time.Millisecond)
	if err := Sleep(context.Background(), c, time.Millisecond); err != nil {
		t.Errorf("Sleep: %v", err)
	}
}
