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
	spacing time.Duration
	burst   float64

	mu        sync.Mutex
	buckets   map[string]bucket
	pruneSize int
}

// bucket is a key's tokens at a time; tokens below zero are reservations.
type bucket struct {
	tokens float64
	at     time.Time
}

func newPacer(spacing time.Duration, burst int) *pacer {
	return &pacer{spacing: spacing, burst: float64(burst), buckets: map[string]bucket{}}
}

// reserve takes a check of key at now and returns the earliest time it
// may start (now when the bucket has a token).
func (p *pacer) reserve(key string, now time.Time) time.Time {
	if p == nil || p.spacing <= 0 {
		return now
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tokens := p.tokens(key, now)
	p.buckets[key] = bucket{tokens: tokens - 1, at: now}
	if len(p.buckets) > 2*p.pruneSize+1024 {
		p.prune(now)
	}
	if tokens >= 1 {
		return now
	}
	return now.Add(time.Duration((1 - tokens) * float64(p.spacing)))
}

func (p *pacer) tokens(key string, now time.Time) float64 {
	b, ok := p.buckets[key]
	if !ok {
		return p.burst
	}
	return min(p.burst, b.tokens+float64(now.Sub(b.at))/float64(p.spacing))
}

// prune forgets the full buckets: a missing one is full.
func (p *pacer) prune(now time.Time) {
	for k := range p.buckets {
		if p.tokens(k, now) >= p.burst {
			delete(p.buckets, k)
		}
	}
	p.pruneSize = len(p.buckets)
}
