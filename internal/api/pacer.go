package api

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
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
	r := p.b.get(key, now).ReserveN(now, 1) // below zero tokens: a reservation
	return now.Add(r.DelayFrom(now))
}

// buckets are token buckets by key (rate.Limiter, driven by the time the
// caller gives), each holding up to burst tokens and gaining one every
// every; a key without a bucket has a full one. The caller guards them.
type buckets struct {
	every     time.Duration
	burst     int
	m         map[string]*rate.Limiter
	pruneSize int
}

func newBuckets(every time.Duration, burst int) buckets {
	return buckets{every: every, burst: max(burst, 1), m: map[string]*rate.Limiter{}}
}

// get returns key's bucket, made full if it has none. When the map has
// grown well beyond what was kept at the last pruning, the full buckets
// are forgotten first (a new one is the same).
func (b *buckets) get(key string, now time.Time) *rate.Limiter {
	if l := b.m[key]; l != nil {
		return l
	}
	if len(b.m) > 2*b.pruneSize+1024 {
		for k, l := range b.m {
			if l.TokensAt(now) >= float64(b.burst) {
				delete(b.m, k)
			}
		}
		b.pruneSize = len(b.m)
	}
	l := rate.NewLimiter(rate.Every(b.every), b.burst) // full at its first use
	b.m[key] = l
	return l
}
