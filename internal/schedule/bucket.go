package schedule

import (
	"math"
	"time"
)

// bucket is a token bucket: rate tokens a second, holding at most burst.
// A zero rate means no limit.
type bucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// newBucket returns a full bucket for perHour tokens an hour that holds a
// minute's worth of tokens, and at least minBurst.
func newBucket(perHour, minBurst float64, now time.Time) *bucket {
	rate := perHour / 3600
	burst := math.Max(minBurst, rate*60)
	return &bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

func (b *bucket) refill(now time.Time) {
	if b.rate == 0 || !now.After(b.last) {
		return
	}
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}

// readyAt returns when the next token is available (now or later).
func (b *bucket) readyAt(now time.Time) time.Time {
	if b.rate == 0 {
		return now
	}
	b.refill(now)
	if b.tokens >= 1 {
		return now
	}
	return now.Add(time.Duration(math.Ceil((1 - b.tokens) / b.rate * 1e9)))
}

func (b *bucket) take() {
	if b.rate != 0 {
		b.tokens--
	}
}
