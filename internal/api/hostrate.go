package api

import (
	"strings"
	"sync"
	"time"
)

// Defaults of the bound on urgent checks per upstream host.
const (
	DefaultHostRate  = 600 // checks a minute
	DefaultHostBurst = 100
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
	every time.Duration // one token per every; 0: no bound
	burst float64

	mu        sync.Mutex
	buckets   map[string]bucket
	pruneSize int
}

func newHostRate(perMinute, burst int) *hostRate {
	h := &hostRate{burst: float64(max(burst, 1)), buckets: map[string]bucket{}}
	if perMinute > 0 {
		h.every = time.Minute / time.Duration(perMinute)
	}
	return h
}

// take takes a token of host at now, or says how long until one is there.
func (h *hostRate) take(host string, now time.Time) (wait time.Duration, ok bool) {
	if h == nil || h.every <= 0 {
		return 0, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tokens := h.tokens(host, now)
	if tokens < 1 {
		return time.Duration((1 - tokens) * float64(h.every)), false
	}
	h.buckets[host] = bucket{tokens: tokens - 1, at: now}
	if len(h.buckets) > 2*h.pruneSize+1024 {
		h.prune(now)
	}
	return 0, true
}

func (h *hostRate) tokens(host string, now time.Time) float64 {
	b, ok := h.buckets[host]
	if !ok {
		return h.burst
	}
	return min(h.burst, b.tokens+float64(now.Sub(b.at))/float64(h.every))
}

// prune forgets the full buckets: a missing one is full.
func (h *hostRate) prune(now time.Time) {
	for k := range h.buckets {
		if h.tokens(k, now) >= h.burst {
			delete(h.buckets, k)
		}
	}
	h.pruneSize = len(h.buckets)
}

// hostOf is the upstream host of a repository key.
func hostOf(key string) string {
	host, _, _ := strings.Cut(key, "/")
	return host
}
