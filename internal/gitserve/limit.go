package gitserve

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// A request waits its turn twice, in fair queues (fairQueue): first
// behind its own client's requests, for one of the client's share of
// requests in service (clientShares, 429 past the wait); then, for a run
// of upload-pack, for a slot under the caps in all and per repository
// (runSlots, 503 past the wait). Its turn, set as it is admitted, carries
// its client to the second queue and bounds both waits together.
type turn struct {
	client string
	until  time.Time // the end of its bounded wait, both queues together
}

type turnKey struct{}

// withTurn returns ctx carrying t. A shared run's context keeps it (it
// keeps the values of the request that started the run).
func withTurn(ctx context.Context, t turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

func turnOf(ctx context.Context) (turn, bool) {
	t, ok := ctx.Value(turnKey{}).(turn)
	return t, ok
}

// clientOf is the client of the request whose context ctx is ("" before
// its turn).
func clientOf(ctx context.Context) string {
	t, _ := turnOf(ctx)
	return t.client
}

// busyError is a request refused for want of room: its status (429 for
// its client's queue, 503 for the run queue) with Retry-After.
type busyError struct {
	status int
	msg    string
}

func (e *busyError) Error() string { return e.msg }

var (
	errBusy     = &busyError{http.StatusServiceUnavailable, "too many git requests at once; retry later"}
	errRepoBusy = &busyError{http.StatusServiceUnavailable, "too many git requests for this repository at once; retry later"}
	// errClientFull is a request of a client over its share that may not
	// wait: the queue is full, or it lost its place to a client with fewer
	// requests waiting.
	errClientFull = &busyError{http.StatusTooManyRequests,
		"too many git requests from your address are waiting; retry later"}
	errClientWait = &busyError{http.StatusTooManyRequests,
		"too many git requests from your address at once: this one waited its turn too long; retry later"}
)

// WaitBounds are the upper bounds of the buckets of a Waits histogram.
var WaitBounds = [...]time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second,
	10 * time.Second, time.Minute, 5 * time.Minute}

// Waits is a histogram of the waits in a queue that ended.
type Waits struct {
	Count   int64
	Sum     time.Duration
	Buckets [len(WaitBounds)]int64 // waits of at most WaitBounds[i] (cumulative)
}

func (w *Waits) observe(d time.Duration) {
	w.Count++
	w.Sum += d
	for i, b := range WaitBounds {
		if d <= b {
			w.Buckets[i]++
		}
	}
}

// waitQueue is a fairQueue with its lock, its clock and its counts: the
// part of waiting that clientShares and runSlots share.
type waitQueue struct {
	clk clock.Clock

	mu     sync.Mutex
	q      fairQueue
	counts QueueCounts
}

// await queues w and waits, until its grant or until, or until ctx is
// done. It is called with mu held and returns with mu held. It fails with
// full when w may not wait (or lost its place), late past until, and
// ctx's error when the client went away; a grant that came as it went
// away is handed on with give.
func (l *waitQueue) await(ctx context.Context, w *waiter, until time.Time, full, late error, give func()) error {
	start := l.clk.Now()
	if !until.After(start) {
		l.counts.Refused++
		return full
	}
	bumped, ok := l.q.push(w)
	if !ok {
		l.counts.Refused++
		return full
	}
	if bumped != nil {
		bumped.bumped = true
		close(bumped.done)
	}
	l.counts.Queued++
	// The timer is set before the waiter shows in the counts: a test that
	// sees it waiting may move a fake clock past its wait.
	timeout := l.clk.After(until.Sub(start))
	l.mu.Unlock()
	select {
	case <-w.done:
	case <-timeout:
	case <-ctx.Done():
	}
	l.mu.Lock()
	l.counts.Waits.observe(l.clk.Now().Sub(start))
	select {
	case <-w.done:
		switch {
		case w.bumped:
			l.counts.Bumped++
			return full
		case ctx.Err() != nil:
			l.counts.Left++
			give()
			return ctx.Err()
		}
		l.counts.Served++
		return nil
	default:
		l.q.remove(w)
		if ctx.Err() != nil {
			l.counts.Left++
			return ctx.Err()
		}
		l.counts.TimedOut++
		return late
	}
}

func (l *waitQueue) snapshot() QueueCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts
	c.Waiting = l.q.len()
	return c
}

// clientShares lets each client address have share requests in service at
// once (0: no cap); more wait their turn in the client's line, oldest
// first. It is safe for concurrent use.
type clientShares struct {
	share int
	waitQueue
	serving map[string]int
}

// acquire takes one of client's shares, waiting until until at the
// latest. size is the bytes the request holds while it waits. It fails
// with a *busyError (429), or ctx's error when the client went away.
func (s *clientShares) acquire(ctx context.Context, client string, size int64, until time.Time) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A client with requests waiting has all its shares in use: a freed
	// share passes to its oldest waiting request (give).
	if s.share <= 0 || s.serving[client] < s.share {
		if s.serving == nil {
			s.serving = map[string]int{}
		}
		s.serving[client]++
		return s.releaser(client), nil
	}
	w := &waiter{client: client, size: size, done: make(chan struct{})}
	if err := s.await(ctx, w, until, errClientFull, errClientWait, func() { s.give(client) }); err != nil {
		return nil, err
	}
	return s.releaser(client), nil
}

func (s *clientShares) releaser(client string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.give(client)
		})
	}
}

// give frees one of client's shares: its oldest waiting request takes it.
func (s *clientShares) give(client string) {
	if w := s.q.first(client); w != nil {
		close(w.done)
		return
	}
	if s.serving[client]--; s.serving[client] <= 0 {
		delete(s.serving, client)
	}
}

// runSlots caps the upload-pack processes in flight, in all and per
// repository (a zero cap is no cap). A run that finds no slot waits in a
// fair queue (the runs of one client after another's, in turn) until the
// end of its turn. It is safe for concurrent use.
type runSlots struct {
	global, perRepo int
	wait            time.Duration // the bound of a wait without a turn
	waitQueue
	total  int
	byRepo map[string]int
}

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

// acquire takes a slot for a run on repo, waiting in the queue until the
// end of ctx's turn (for the bounded wait when ctx has none). It fails
// with a *busyError (503), or ctx's error.
func (s *runSlots) acquire(ctx context.Context, repo string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free(repo) { // nobody waiting could take it: give hands out slots as they free
		s.take(repo)
		return s.releaser(repo), nil
	}
	full := errBusy
	if s.global <= 0 || s.total < s.global {
		full = errRepoBusy
	}
	t, ok := turnOf(ctx)
	if !ok {
		t.until = s.clk.Now().Add(s.wait)
	}
	w := &waiter{client: t.client, repo: repo, done: make(chan struct{})}
	if err := s.await(ctx, w, t.until, full, full, func() { s.give(repo) }); err != nil {
		return nil, err
	}
	return s.releaser(repo), nil
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

// give frees repo's slot and grants the freed room to the waiting runs
// that it lets run, taking their clients in turn.
func (s *runSlots) give(repo string) {
	s.total--
	if s.byRepo[repo]--; s.byRepo[repo] <= 0 {
		delete(s.byRepo, repo)
	}
	for {
		w := s.q.take(func(w *waiter) bool { return s.free(w.repo) })
		if w == nil {
			return
		}
		s.take(w.repo)
		close(w.done)
	}
}

func (s *runSlots) stats() QueueStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts
	c.Waiting = s.q.len()
	return QueueStats{Running: s.total, QueueCounts: c}
}

// QueueStats counts what the queues did since the Handler started: the
// run queue's in the embedded QueueCounts, the clients' queue's in
// Clients.
type QueueStats struct {
	Running int // upload-pack runs in flight now
	QueueCounts
	Clients QueueCounts // requests over their client's share
}

// QueueCounts counts what one queue did.
type QueueCounts struct {
	Waiting  int   // requests waiting now
	Queued   int64 // requests that waited
	Served   int64 // of those, the ones whose turn came
	TimedOut int64 // the ones that waited in vain: 429 (clients' queue) or 503 (run queue)
	Left     int64 // the ones whose clients went away while they waited
	Bumped   int64 // the ones that lost their place to a client with fewer waiting (as TimedOut)
	Refused  int64 // requests that could not wait, answered at once (as TimedOut)
	Waits    Waits // how long the requests that waited waited
}
