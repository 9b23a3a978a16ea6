package backoff

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func TestDelayDoublesFromTheBaseUpToTheLimit(t *testing.T) {
	const base, limit = time.Second, time.Minute
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{
		{-1, base}, {0, base}, {1, base}, {2, 2 * base}, {3, 4 * base}, {6, 32 * base},
		{7, limit}, {100, limit}, {1 << 30, limit},
	} {
		if got := Delay(tt.n, base, limit); got != tt.want {
			t.Errorf("Delay(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
	if got := Delay(200, time.Hour, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("Delay near the largest duration = %v, want the limit (no overflow)", got)
	}
	if got := Delay(1<<30, 0, time.Minute); got != 0 {
		t.Errorf("Delay from a zero base = %v, want 0", got)
	}
}

// fraction is a Source that draws the same fraction of its range each time.
type fraction float64

func (f fraction) Int64N(n int64) int64 { return int64(float64(f) * float64(n-1)) }

// The partial node's tunnel redial waits (first failure: n = 1).
func TestJitteredDelay(t *testing.T) {
	const minWait, maxWait = time.Second, time.Minute
	tests := []struct {
		name     string
		failures int
		jitter   float64
		want     time.Duration
	}{
		{name: "first retry without jitter waits half the minimum", failures: 0, jitter: 0, want: 500 * time.Millisecond},
		{name: "first retry with jitter waits between half and all the minimum", failures: 0, jitter: 0.5, want: 750 * time.Millisecond},
		{name: "each failure doubles the wait", failures: 3, jitter: 0.5, want: 6 * time.Second},
		{name: "wait is capped at the maximum", failures: 10, jitter: 0.5, want: 45 * time.Second},
		{name: "huge failure count does not overflow", failures: 1 << 30, jitter: 0, want: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Jitter(Delay(tt.failures+1, minWait, maxWait), fraction(tt.jitter)); got != tt.want {
				t.Fatalf("backoff(%d failures, jitter %v) = %v, want %v", tt.failures, tt.jitter, got, tt.want)
			}
		})
	}
}

func TestJitterStaysWithinHalfAndAllOfTheWait(t *testing.T) {
	const d = 10 * time.Second
	lo, hi := d, time.Duration(0)
	for range 10000 {
		j := Jitter(d, nil)
		lo, hi = min(lo, j), max(hi, j)
	}
	if lo < d/2 || hi > d {
		t.Fatalf("draws within [%v, %v], want within [%v, %v]", lo, hi, d/2, d)
	}
	if hi-lo < d/4 {
		t.Errorf("10000 draws spread over %v only", hi-lo)
	}
	if got := Jitter(d, fraction(1)); got != d {
		t.Errorf("the top of the range: %v, want %v", got, d)
	}
	if got := Jitter(0, nil); got != 0 {
		t.Errorf("Jitter(0) = %v", got)
	}
}

// A seeded source gives the waits the scheduler has always drawn from it:
// half the wait plus Int64N(half + 1).
func TestJitterDrawsOnceFromItsSource(t *testing.T) {
	a, b := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	for n := 1; n < 12; n++ {
		d := Delay(n, time.Minute, 24*time.Hour)
		if got, want := Jitter(d, a), d/2+time.Duration(b.Int64N(int64(d/2)+1)); got != want {
			t.Fatalf("failure %d: %v, want %v", n, got, want)
		}
	}
}

func TestBackoffCountsFailuresAndResetsOnSuccess(t *testing.T) {
	b := New(clock.NewFake(t0), time.Second, 10*time.Second)
	var waits []time.Duration
	for range 6 {
		waits = append(waits, b.Failed())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	b.Reset()
	if w := b.Failed(); w != time.Second {
		t.Errorf("after Reset: wait %v, want the base", w)
	}
	if w := b.Longest(); w != 10*time.Second {
		t.Errorf("Longest: %v, want the limit", w)
	}
	if w := b.Failed(); w != 4*time.Second {
		t.Errorf("the failure after Longest: %v, want the third wait (Longest counts a failure)", w)
	}
	if w := New(nil, time.Minute, time.Second).Failed(); w != time.Minute {
		t.Errorf("a limit below the base: %v, want the base", w)
	}
}

func TestJitteredBackoffWaitsBetweenHalfAndAllOfEachDelay(t *testing.T) {
	b := New(clock.NewFake(t0), time.Second, time.Minute).Jittered(rand.New(rand.NewPCG(1, 2)))
	for n := 1; n <= 10; n++ {
		d := Delay(n, time.Second, time.Minute)
		if w := b.Failed(); w < d/2 || w > d {
			t.Errorf("failure %d: wait %v, want within [%v, %v]", n, w, d/2, d)
		}
	}
	if w := b.Longest(); w < 30*time.Second || w > time.Minute {
		t.Errorf("Longest: %v, want within [30s, 1m]", w)
	}
}

// run starts Retry in a goroutine on a fake clock and returns what it
// reports: each retry's wait, then its result.
type run struct {
	clk      *clock.Fake
	calls    int
	mismatch bool // retrying was told of another attempt than the last
	waits    chan time.Duration
	result   chan error
}

func startRetry(ctx context.Context, attempts int, try func(n int) error) *run {
	r := &run{clk: clock.NewFake(t0), waits: make(chan time.Duration, 100), result: make(chan error, 1)}
	b := New(r.clk, time.Second, 4*time.Second)
	go func() {
		r.result <- Retry(ctx, b, attempts, func(context.Context) error {
			r.calls++
			return try(r.calls)
		}, func(attempt int, wait time.Duration, err error) {
			r.mismatch = r.mismatch || attempt != r.calls || err == nil
			r.waits <- wait
		})
	}()
	return r
}

// done returns Retry's result.
func (r *run) done(t *testing.T) error {
	t.Helper()
	err := <-r.result
	if r.mismatch {
		t.Error("retrying was told of another attempt than the one that failed")
	}
	return err
}

// elapse waits until the loop waits on the clock, and lets wait pass.
func (r *run) elapse(t *testing.T, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // bounds a failure only
	for r.clk.Timers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Retry does not wait on its clock")
		}
		time.Sleep(time.Millisecond)
	}
	r.clk.Advance(wait - time.Nanosecond)
	select {
	case err := <-r.result:
		t.Fatalf("Retry returned %v before its wait of %v had passed", err, wait)
	default:
	}
	if r.clk.Timers() != 1 {
		t.Fatalf("the wait of %v ended early", wait)
	}
	r.clk.Advance(time.Nanosecond)
}

var errDown = errors.New("receiver down")

func TestRetryWaitsTheBackoffBetweenTriesUntilOneSucceeds(t *testing.T) {
	r := startRetry(context.Background(), 6, func(n int) error {
		if n < 4 {
			return errDown
		}
		return nil
	})
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if got := <-r.waits; got != want {
			t.Fatalf("wait %v, want %v", got, want)
		}
		r.elapse(t, want)
	}
	if err := r.done(t); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if r.calls != 4 {
		t.Errorf("%d tries, want 3 failures and a success", r.calls)
	}
}

func TestRetryGivesUpAfterItsAttempts(t *testing.T) {
	r := startRetry(context.Background(), 3, func(int) error { return errDown })
	for range 2 {
		r.elapse(t, <-r.waits)
	}
	if err := r.done(t); !errors.Is(err, errDown) {
		t.Fatalf("Retry: %v, want the last error", err)
	}
	if r.calls != 3 || len(r.waits) != 0 || r.clk.Timers() != 0 {
		t.Errorf("%d tries, %d more waits, %d timers armed: want 3 tries and no wait after the last", r.calls, len(r.waits), r.clk.Timers())
	}
}

func TestRetryStopsAtAPermanentError(t *testing.T) {
	r := startRetry(context.Background(), 6, func(int) error { return Permanent(errDown) })
	err := r.done(t)
	if !errors.Is(err, errDown) {
		t.Fatalf("Retry: %v, want the error", err)
	}
	if _, marked := errors.AsType[permanentError](err); marked {
		t.Error("the error is returned still marked permanent")
	}
	if r.calls != 1 || len(r.waits) != 0 {
		t.Errorf("%d tries and %d waits, want 1 and none", r.calls, len(r.waits))
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
}

func TestRetryStopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := startRetry(ctx, 0, func(int) error { return errDown })
	<-r.waits
	cancel()
	if err := r.done(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Retry cancelled while it waits: %v, want context.Canceled", err)
	}
	if r.calls != 1 || r.clk.Timers() != 0 {
		t.Errorf("%d tries, %d timers armed: want 1 and none", r.calls, r.clk.Timers())
	}

	// A try that fails because the context ended is not waited after.
	ctx, cancel = context.WithCancel(context.Background())
	r = startRetry(ctx, 0, func(int) error { cancel(); return errDown })
	if err := r.done(t); !errors.Is(err, errDown) {
		t.Fatalf("Retry: %v, want the try's error", err)
	}
	if len(r.waits) != 0 {
		t.Error("Retry waited after its context ended")
	}
}

func TestRetryWithoutABoundKeepsTrying(t *testing.T) {
	r := startRetry(context.Background(), 0, func(n int) error {
		if n < 10 {
			return errDown
		}
		return nil
	})
	for range 9 {
		r.elapse(t, <-r.waits)
	}
	if err := r.done(t); err != nil || r.calls != 10 {
		t.Fatalf("Retry: %v after %d tries, want success at the 10th", err, r.calls)
	}
}
