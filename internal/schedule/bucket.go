package schedule

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// newBucket returns a token bucket for perHour tokens an hour that holds a
// minute's worth of whole tokens, and at least minBurst and one; nil (no limit)
// for perHour <= 0. It is driven by the scheduler's now (the *N methods
// and TokensAt take the time), and is full at its first use.
func newBucket(perHour float64, minBurst int) *rate.Limiter {
	if perHour <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(perHour/3600), max(1, minBurst, int(perHour/60)))
}

// readyAt returns when b has a token (now or later).
func readyAt(b *rate.Limiter, now time.Time) time.Time {
	tokens := b.TokensAt(now)
	if tokens >= 1 {
		return now
	}
	// Rounded up, so that the token is there at the time returned.
	return now.Add(time.Duration(math.Ceil((1 - tokens) / float64(b.Limit()) * 1e9)))
}
