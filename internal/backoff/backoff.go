// Package backoff is gitfleet's one rule for waiting after failures: the
// wait doubles with each failure in a row from a base up to a limit, may be
// jittered so that peers that failed together do not come back together,
// and starts again from the base after a success (Reset). Retry is the
// one loop that retries a delivery with it.
//
// The arithmetic (Delay, Jitter) is pure, so that a pure core such as the
// freshness scheduler uses the same rule with its own random source. The
// waits run on an injected clock.Clock: tests drive them with clock.Fake.
// The package holds no goroutine and does no I/O.
package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// Delay is the wait after the nth failure in a row, before jitter: base
// for the first (n <= 1), doubled for each one after, never above limit.
func Delay(n int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d > 0 && d < limit; i++ {
		if d > limit/2 {
			return limit // doubling would pass it (or overflow)
		}
		d *= 2
	}
	return min(d, limit)
}

// Source draws the jitter: *rand.Rand of math/rand/v2 is one.
type Source interface {
	// Int64N returns a uniform draw from [0, n).
	Int64N(n int64) int64
}

// globalSource is math/rand/v2's shared source.
type globalSource struct{}

func (globalSource) Int64N(n int64) int64 { return rand.Int64N(n) }

// Jitter returns a uniform draw from [d/2, d] made with src ("equal
// jitter": never less than half the wait, never more than all of it).
// A nil src draws from math/rand/v2's shared source.
func Jitter(d time.Duration, src Source) time.Duration {
	if d <= 0 {
		return d
	}
	if src == nil {
		src = globalSource{}
	}
	return d/2 + time.Duration(src.Int64N(int64(d/2)+1))
}

// Backoff counts the failures in a row of one loop and says how long to
// wait after each. One loop owns it: it is not safe for concurrent use.
type Backoff struct {
	clk         clock.Clock
	base, limit time.Duration
	jitter      bool
	src         Source
	failures    int
}

// New returns a Backoff on clk whose waits go from base to limit, without
// jitter. A limit below base is base.
func New(clk clock.Clock, base, limit time.Duration) *Backoff {
	return &Backoff{clk: clk, base: base, limit: max(limit, base)}
}

// Jittered makes each wait a draw from [d/2, d] (see Jitter), drawn from
// src (nil: math/rand/v2's shared source), and returns b.
func (b *Backoff) Jittered(src Source) *Backoff {
	b.jitter, b.src = true, src
	return b
}

// Failed counts a failure and returns the wait before the next try.
func (b *Backoff) Failed() time.Duration {
	b.failures++
	return b.wait(Delay(b.failures, b.base, b.limit))
}

// Longest counts a failure and returns the longest wait, jittered as the
// others: for a failure that trying again soon would not cure.
func (b *Backoff) Longest() time.Duration {
	b.failures++
	return b.wait(b.limit)
}

func (b *Backoff) wait(d time.Duration) time.Duration {
	if b.jitter {
		return Jitter(d, b.src)
	}
	return d
}

// Reset forgets the failures: the next wait is the base again.
func (b *Backoff) Reset() { b.failures = 0 }

// Wait waits d on b's clock, or until ctx ends (it returns ctx.Err() then).
func (b *Backoff) Wait(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, b.clk, d)
}

// permanentError marks an error that retrying would not cure.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as one that retrying would not cure: Retry returns
// it (unmarked) at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// Retry calls try until it succeeds, and waits b's backoff on b's clock
// after each failure. It gives up, returning try's last error, after
// attempts calls (attempts <= 0: no bound), at once on an error marked
// Permanent, and when ctx ends (returning ctx.Err() if it ended during a
// wait). Before each wait it calls retrying, if not nil, with the number of
// the attempt that failed (from 1), the wait and the error. b is reset on
// success.
func Retry(ctx context.Context, b *Backoff, attempts int, try func(context.Context) error,
	retrying func(attempt int, wait time.Duration, err error)) error {
	for attempt := 1; ; attempt++ {
		err := try(ctx)
		if err == nil {
			b.Reset()
			return nil
		}
		if p, ok := errors.AsType[permanentError](err); ok {
			return p.err
		}
		if ctx.Err() != nil || attempt == attempts {
			return err
		}
		wait := b.Failed()
		if retrying != nil {
			retrying(attempt, wait, err)
		}
		if err := b.Wait(ctx, wait); err != nil {
			return err
		}
	}
}
