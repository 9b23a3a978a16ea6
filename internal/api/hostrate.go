package api

import (
	"sync"
	"time"
)

// hostRate bounds the urgent checks (webhooks and the API's on-demand
// fetches together) of each upstream host: a token bucket per host that
// holds up to burst checks and gains rate a minute. A check that finds
// its host's bucket empty is refused, with the time until the next token,
// rather than queued: the caller says when to come back. So a flood of
// deliveries naming many repositories of one host costs that host at most
// burst checks, then rate a minute, whatever the pacing of each
// repository. It is pure: the caller gives the time. It is safe for
// concurrent use.
type hostRate struct {
	mu sync.Mutex
	b  buckets // every 0: no bound
}

func newHostRate(perMinute, burst int) *hostRate {
	var every time.Duration
	if perMinute > 0 {
		every = time.Minute / time.Duration(perMinute)
	}
	return &hostRate{b: newBuckets(every, burst)}
}

// take takes a token of host at now, or says how long until one is there.
func (h *hostRate) take(host string, now time.Time) (wait time.Duration, ok bool) {
	if h == nil || h.b.every <= 0 {
		return 0, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.b.get(host, now)
	if l.AllowN(now, 1) {
		return 0, true
	}
	return time.Duration((1 - l.TokensAt(now)) * float64(h.b.every)), false
}
