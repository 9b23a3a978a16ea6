package api

import (
	"sync"
	"time"
)

// hookBurst is how many webhook-triggered checks of one repository may
// start back to back before they are spaced.
const hookBurst = 5

// pacer spaces the webhook-triggered checks of each repository: a token
// bucket per key that holds up to burst checks and gains one every
// spacing. A check that finds the bucket empty is reserved for when it
// refills, and the pushes that come meanwhile join that queued check. So
// a lone push, or a few, are checked at once, and a stream of pushes to
// one repository costs one check per spacing. It is pure: the caller
// gives the time. It is safe for concurrent use.
type pacer struct {
	mu sync.Mutex
	b  buckets
}

func newPacer(spacing time.Duration, burst int) *pacer {
	return &pacer{b: newBuckets(spacing, burst)}
}

// reserve takes a check of key at now and returns the earliest time it
// may start (now when the bucket has a token).
func (p *pacer) reserve(key string, now time.Time) time.Time {
	if p == nil || p.b.every <= 0 {
		return now
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tokens := p.b.tokens(key, now)
	p.b.set(key, tokens-1, now) // below zero: a reservation
	if tokens >= 1 {
		return now
	}
	return now.Add(time.Duration((1 - tokens) * float64(p.b.every)))
}

// buckets are token buckets by key, each holding up to burst tokens and
// gaining one every every; a key without a bucket has a full one. The
// caller guards them.
type buckets struct {
	every     time.Duration
	burst     float64
	m         map[string]bucket
	pruneSize int
}

// bucket is a key's tokens at a time; tokens below zero are reservations.
type bucket struct {
	tokens float64
	at     time.Time
}

func newBuckets(every time.Duration, burst int) buckets {
	return buckets{every: every, burst: float64(max(burst, 1)), m: map[string]bucket{}}
}

func (b *buckets) tokens(key string, now time.Time) float64 {
	k, ok := b.m[key]
	if !ok {
		return b.burst
	}
	return min(b.burst, k.tokens+float64(now.Sub(k.at))/float64(b.every))
}

// set records key's tokens at now, and forgets the full buckets when the
// map has grown well beyond what was kept at the last pruning.
func (b *buckets) set(key string, tokens float64, now time.Time) {
	b.m[key] = bucket{tokens: tokens, at: now}
	if len(b.m) <= 2*b.pruneSize+1024 {
		return
	}
	for k := range b.m {
		if b.tokens(k, now) >= b.burst {
			delete(b.m, k)
		}
	}
	b.pruneSize = len(b.m)
}
