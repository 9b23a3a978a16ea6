package gitserve

import (
	"context"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// clientLimit caps the requests in service per client address. A zero cap
// is no cap. It fails at once rather than queueing: the client holds the
// connections, and it can wait itself. It is safe for concurrent use.
type clientLimit struct {
	max int

	mu       sync.Mutex
	byClient map[string]int
}

// acquire takes a slot for client, or reports false when it has max.
func (l *clientLimit) acquire(client string) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.byClient[client] >= l.max {
		return nil, false
	}
	if l.byClient == nil {
		l.byClient = map[string]int{}
	}
	l.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.byClient[client]--; l.byClient[client] <= 0 {
				delete(l.byClient, client)
			}
		})
	}, true
}

// runSlots caps the upload-pack processes in flight, in all and per
// repository (a zero cap is no cap). A run that finds no slot waits in a
// queue of bounded length, first come first served among those that a
// freed slot lets run, for a bounded time. It is safe for concurrent use.
type runSlots struct {
	global, perRepo int
	maxQueue        int
	wait            time.Duration
	clk             clock.Clock

	mu       sync.Mutex
	total    int
	byRepo   map[string]int
	queue    []*slotWaiter
	queued   int64 // runs that waited
	timedOut int64 // runs that waited in vain
}

type slotWaiter struct {
	repo    string
	granted chan struct{} // closed when the slot is taken for it
}

// busyError is a run refused for want of a slot: 503 with Retry-After.
type busyError struct{ msg string }

func (e *busyError) Error() string { return e.msg }

var (
	errBusy     = &busyError{"too many git requests at once; retry later"}
	errRepoBusy = &busyError{"too many git requests for this repository at once; retry later"}
)

func (s *runSlots) free(repo string) bool {
	return (s.global <= 0 || s.total < s.global) && (s.perRepo <= 0 || s.byRepo[repo] < s.perRepo)
}

func (s *runSlots) take(repo string) {
	if s.byRepo == nil {
		s.byRepo = map[string]int{}
	}
	s.total++
	s.byRepo[repo]++
}

// acquire takes a slot for a run on repo, waiting in the queue up to the
// bounded wait. It fails with a *busyError, or ctx's error.
func (s *runSlots) acquire(ctx context.Context, repo string) (release func(), err error) {
	s.mu.Lock()
	if s.free(repo) { // nobody in the queue could take it: grant hands out slots as they free
		s.take(repo)
		s.mu.Unlock()
		return s.releaser(repo), nil
	}
	full := errBusy
	if s.global <= 0 || s.total < s.global {
		full = errRepoBusy
	}
	if s.wait <= 0 || len(s.queue) >= s.maxQueue {
		s.mu.Unlock()
		return nil, full
	}
	w := &slotWaiter{repo: repo, granted: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.queued++
	s.mu.Unlock()
	select {
	case <-w.granted:
		return s.releaser(repo), nil
	case <-s.clk.After(s.wait):
		err = full
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // granted as we gave up: hand it on
		s.give(repo)
	default:
		for i, q := range s.queue {
			if q == w {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				break
			}
		}
	}
	if err == full {
		s.timedOut++
	}
	return nil, err
}

func (s *runSlots) releaser(repo string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.give(repo)
		})
	}
}

// give frees repo's slot and grants the freed room to the first waiters
// that it lets run.
func (s *runSlots) give(repo string) {
	s.total--
	if s.byRepo[repo]--; s.byRepo[repo] <= 0 {
		delete(s.byRepo, repo)
	}
	kept := s.queue[:0]
	for _, w := range s.queue {
		if s.free(w.repo) {
			s.take(w.repo)
			close(w.granted)
			continue
		}
		kept = append(kept, w)
	}
	clear(s.queue[len(kept):])
	s.queue = kept
}

// QueueStats counts what the run queue did since the Handler started.
type QueueStats struct {
	Running  int   // upload-pack runs in flight now
	Waiting  int   // runs in the queue now
	Queued   int64 // runs that waited for a slot
	TimedOut int64 // runs that waited in vain (503)
}

func (s *runSlots) stats() QueueStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return QueueStats{Running: s.total, Waiting: len(s.queue), Queued: s.queued, TimedOut: s.timedOut}
}
