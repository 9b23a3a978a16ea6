package gitserve

import (
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// Bounds of the memory of recently advertised tips.
const (
	DefaultTipGrace = 30 * time.Second
	// maxTipsPerRepo bounds the tips kept of one listing (a repository
	// with more refs has its first ones kept: HEAD and the branches).
	maxTipsPerRepo = 5000
	// maxTips bounds the tips kept in all (a few MB).
	maxTips = 50000
)

// recentTips remembers, per repository, the tips that its protocol v2 ref
// listings (ls-refs) advertised in the last grace period. A client lists
// the refs, then asks for the tips in a second request: a force-push that
// the mirror took in between makes an old tip unreachable from the refs,
// and the client would get "not our ref" for what it was just told. A tip
// remembered here is served still, while its object is on disk; older
// ones, and objects that were never a tip, are not (the prune of what the
// upstream dropped is no weaker: it was public a moment ago, and once it
// is gone from disk it is refused). The memory is bounded: past maxTips it
// keeps no more until some expire. It is safe for concurrent use.
type recentTips struct {
	clk   clock.Clock
	grace time.Duration

	mu      sync.Mutex
	repos   map[string]map[string]time.Time // key -> tip -> last advertised
	n       int                             // tips kept in all
	sweptAt time.Time
}

func newRecentTips(clk clock.Clock, grace time.Duration) *recentTips {
	return &recentTips{clk: clk, grace: grace, repos: map[string]map[string]time.Time{}}
}

// record remembers tips as advertised now by key's repository.
func (r *recentTips) record(key string, tips []string) {
	now := r.clk.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire(key, now)
	kept := r.repos[key]
	for _, tip := range tips {
		if _, ok := kept[tip]; !ok && r.n >= maxTips {
			if r.sweep(now); r.n >= maxTips {
				break
			}
		}
		if kept == nil {
			kept = map[string]time.Time{}
			r.repos[key] = kept
		}
		if _, ok := kept[tip]; !ok {
			r.n++
		}
		kept[tip] = now
	}
}

// advertised reports whether key's repository advertised tip within the
// grace period.
func (r *recentTips) advertised(key, tip string) bool {
	now := r.clk.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.repos[key][tip]
	return ok && now.Sub(at) <= r.grace
}

// expire drops key's tips older than the grace period.
func (r *recentTips) expire(key string, now time.Time) {
	kept := r.repos[key]
	for tip, at := range kept {
		if now.Sub(at) > r.grace {
			delete(kept, tip)
			r.n--
		}
	}
	if kept != nil && len(kept) == 0 {
		delete(r.repos, key)
	}
}

// sweep expires every repository's old tips, at most once an eighth of
// the grace period (a full memory is not walked on every listing).
func (r *recentTips) sweep(now time.Time) {
	if now.Sub(r.sweptAt) < r.grace/8 {
		return
	}
	r.sweptAt = now
	for key := range r.repos {
		r.expire(key, now)
	}
}
