// Package feedplan decides which repositories a forge's change feed asks
// about next. A forge answers, for a batch of repositories a request, when
// each was last pushed; the feed can ask about PerHour repositories an
// hour, and this planner spends that budget where the changes are.
//
// Each repository's change rate is learned from the push times the forge
// returns, with the model the scheduler's adaptive policy uses
// (changerate: decayed episodes over a decayed exposure), and each is
// asked about at the interval that buys the most freshness for the budget
// (Cho & Garcia-Molina's closed form for Poisson sources, one price for
// all, solved over a histogram of the rates: freshness.Price), but at
// least once per MaxInterval. A repository whose push is seen when asked
// about becomes fresh at once (the feed turns the push into an urgent
// check), so asking about it is worth what a check would be.
//
// It owns the plan only: it must not talk to a forge, read the clock or
// start goroutines. The feed passes the time in on every call, asks the
// forge about what Next returns, and reports each answer with Observe. A
// Planner is not safe for concurrent use.
package feedplan

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule/changerate"
	"github.com/gitfleet/gitfleet/internal/schedule/freshness"
)

// Options configures a Planner.
type Options struct {
	// PerHour is the number of repositories that may be asked about an
	// hour: requests an hour times repositories a request. Required.
	PerHour float64
	// MaxInterval is the longest a repository goes without being asked
	// about (default 24h), when the budget allows it: with more than
	// PerHour x MaxInterval repositories, the budget wins, and the
	// repositories go in the order they fell due.
	MaxInterval time.Duration
	// MinInterval is the shortest time between two asks about one
	// repository (default 1m): Next never returns a key asked about
	// within it.
	MinInterval time.Duration
	// FedMaxAge is how long an answer for a repository keeps it fed (0:
	// twice its interval, so that one late ask does not unfeed it).
	FedMaxAge time.Duration
}

const (
	defaultMaxInterval = 24 * time.Hour
	defaultMinInterval = time.Minute
	// minResolve: the price is solved again after max(minResolve, Len/8)
	// changes of the rate histogram.
	minResolve = 64
	// coverageScan is the least time between two scans of Coverage for
	// the repositories whose answer grew too old.
	coverageScan = time.Minute
)

// Planner plans the asks of one feed. At a million repositories it takes
// about 96 bytes a repository besides the key's own bytes (see
// BenchmarkMemory1M).
type Planner struct {
	opts    Options
	index   keyIndex
	entries []entry
	free    []int32 // indices of removed entries, for reuse
	queue   queue   // entries by due time, earliest first

	hist   changerate.Histogram
	mu     float64 // price of an ask, in fresh-seconds
	solved bool
	// intervals is the ask interval of each rate bin at price mu, 0
	// until it is needed.
	intervals [changerate.Bins]time.Duration
	updates   int    // histogram changes since mu was solved
	adds      uint64 // repositories added, for spreading their first asks

	// gained are the keys answered for since Coverage last ran that were
	// not fed; fed counts the fed entries; scanned is when Coverage last
	// looked for answers grown too old.
	gained  []string
	fed     int
	scanned time.Time
}

// entry is one repository. Its rate bin is not kept: it is the bin of
// est.Rate(), which changes only where the entry is counted again.
type entry struct {
	key string
	est changerate.Estimate
	pos int32 // index in the queue, -1 for a removed entry
	// asked and answered are the last ask and the last answer (Unix
	// seconds, 0: never); fed says whether Coverage reported it fed.
	asked, answered uint32
	fed             bool
}

// due is an entry's place in the queue. The time is kept here, not in the
// entry, so that ordering the queue reads only the queue.
type due struct {
	at uint32 // Unix seconds
	i  int32  // the entry
}

// New returns a Planner for opts.
func New(opts Options) (*Planner, error) {
	if !(opts.PerHour > 0) || math.IsInf(opts.PerHour, 1) {
		return nil, fmt.Errorf("feedplan: %v repositories an hour: must be a finite number > 0", opts.PerHour)
	}
	if opts.MaxInterval < 0 || opts.MinInterval < 0 {
		return nil, fmt.Errorf("feedplan: intervals must be >= 0 (min %v, max %v)", opts.MinInterval, opts.MaxInterval)
	}
	if opts.MaxInterval == 0 {
		opts.MaxInterval = defaultMaxInterval
	}
	if opts.MinInterval == 0 {
		opts.MinInterval = defaultMinInterval
	}
	if opts.MinInterval > opts.MaxInterval {
		return nil, fmt.Errorf("feedplan: min interval %v is longer than max interval %v", opts.MinInterval, opts.MaxInterval)
	}
	if opts.FedMaxAge < 0 {
		return nil, fmt.Errorf("feedplan: fed max age %v: must be >= 0", opts.FedMaxAge)
	}
	p := &Planner{opts: opts, index: newKeyIndex()}
	p.queue.entries = &p.entries
	return p, nil
}

func unixSeconds(t time.Time) uint32 {
	return uint32(min(max(t.Unix(), 0), math.MaxUint32))
}

// ceilSeconds is unixSeconds rounded up: a time not before t, so that an
// interval from it is never cut short.
func ceilSeconds(t time.Time) uint32 {
	return unixSeconds(t.Add(time.Second - 1))
}

// Len returns the number of repositories planned.
func (p *Planner) Len() int { return p.index.n }

// Add starts planning key, whose known changes (push or commit times, any
// order; the slice is not kept) are history: its rate is learned from them
// as the scheduler learns it. Its first ask is spread over its interval
// from now, so that adding many at once does not make them due at once.
// Adding a key already planned changes nothing.
func (p *Planner) Add(key string, now time.Time, history []time.Time) {
	if _, i := p.index.find(key, p.entries); i >= 0 {
		return
	}
	var i int32
	if n := len(p.free); n > 0 {
		i, p.free = p.free[n-1], p.free[:n-1]
	} else {
		i = int32(len(p.entries))
		p.entries = append(p.entries, entry{})
	}
	e := &p.entries[i]
	*e = entry{key: key}
	begin(&e.est, history, now)
	p.index.insert(i, p.entries)
	p.count(e)
	p.adds++
	_, spread := math.Modf(float64(p.adds) * 0.6180339887498949)
	p.push(i, now.Add(time.Duration(spread*float64(p.interval(e)))))
}

// push puts entry i in the queue, due at t.
func (p *Planner) push(i int32, t time.Time) {
	heap.Push(&p.queue, due{at: ceilSeconds(t), i: i})
}

// begin starts est from a repository's history: its exposure starts at the
// first known change.
func begin(est *changerate.Estimate, history []time.Time, now time.Time) {
	est.Start(now)
	if len(history) == 0 {
		return
	}
	if !slices.IsSortedFunc(history, time.Time.Compare) {
		history = slices.SortedFunc(slices.Values(history), time.Time.Compare)
	}
	if !history[0].Before(now) {
		return
	}
	est.Start(history[0])
	est.Decay(now)
	for _, t := range history {
		est.Count(now, t)
	}
}

// Remove stops planning key. Unknown keys are ignored.
func (p *Planner) Remove(key string) {
	s, i := p.index.find(key, p.entries)
	if i < 0 {
		return
	}
	e := &p.entries[i]
	p.uncount(e)
	if e.fed {
		p.fed--
	}
	heap.Remove(&p.queue, int(e.pos))
	p.index.delete(s, p.entries)
	*e = entry{pos: -1}
	p.free = append(p.free, i)
}

// Next returns the keys to ask about now, at most n: those due, earliest
// first, and, to fill the batch when one is due, those due soonest after
// them that were not asked about within MinInterval (a request costs the
// same for one repository as for n). Nothing is due: nil, and NextDue says
// when to call again. The caller calls it at most at the budget's pace,
// one batch every n/PerHour hours. Each key returned is not due again
// before its interval has passed; a key the forge does not answer for is
// asked about again at its usual interval.
func (p *Planner) Next(now time.Time, n int) []string {
	n = min(n, p.queue.Len())
	if n <= 0 || p.queue.items[0].at > unixSeconds(now) {
		return nil
	}
	keys := make([]string, 0, n)
	var asked, early []int32
	recent := unixSeconds(now.Add(-p.opts.MinInterval))
	for len(keys) < n && p.queue.Len() > 0 {
		d := heap.Pop(&p.queue).(due)
		e := &p.entries[d.i]
		if d.at > unixSeconds(now) && e.asked != 0 && e.asked > recent {
			early = append(early, d.i) // asked about within MinInterval: not to fill a batch
			if len(early) >= n {
				break // the rest are due later still
			}
			continue
		}
		keys = append(keys, e.key)
		asked = append(asked, d.i)
	}
	for _, i := range early {
		p.push(i, time.Unix(int64(p.entries[i].asked), 0).Add(p.interval(&p.entries[i])))
	}
	for _, i := range asked {
		p.entries[i].asked = ceilSeconds(now)
		p.push(i, now.Add(p.interval(&p.entries[i])))
	}
	return keys
}

// Failed reports that the request asking about keys, which Next returned
// at now, failed: nothing was learnt, so each is due again at once (the
// caller's backoff paces the retry). Unknown keys are ignored.
func (p *Planner) Failed(keys []string, now time.Time) {
	for _, k := range keys {
		if _, i := p.index.find(k, p.entries); i >= 0 {
			p.queue.items[p.entries[i].pos].at = unixSeconds(now)
			heap.Fix(&p.queue, int(p.entries[i].pos))
		}
	}
}

// NextDue returns when the earliest key falls due (zero when none is
// planned).
func (p *Planner) NextDue() time.Time {
	if p.queue.Len() == 0 {
		return time.Time{}
	}
	return time.Unix(int64(p.queue.items[0].at), 0)
}

// MinInterval returns the least time between two asks about one
// repository.
func (p *Planner) MinInterval() time.Duration { return p.opts.MinInterval }

// SetMinInterval raises the shortest time between two asks about one
// repository to d, when longer (a forge's X-Poll-Interval, say), up to
// MaxInterval. It returns the interval in force.
func (p *Planner) SetMinInterval(d time.Duration) time.Duration {
	if d > p.opts.MinInterval {
		p.opts.MinInterval = min(d, p.opts.MaxInterval)
		p.solved = false // the intervals of the old bound are forgotten at the next solve
	}
	return p.opts.MinInterval
}

// Observe reports the forge's answer for key, asked about at askedAt:
// pushedAt is the repository's last push; a zero pushedAt (the forge did
// not answer for it) is not a change. A push already known is not counted
// again, and one said to be after the ask is taken as at the ask, so that a
// forge's clock (or a hostile answer) cannot stop the planner from
// counting the pushes to come. Unknown keys are ignored. It returns
// whether the answer is a push later than one already known for key: the
// first answer for a key only teaches its last push.
func (p *Planner) Observe(key string, askedAt, pushedAt time.Time) (newPush bool) {
	_, i := p.index.find(key, p.entries)
	if i < 0 || pushedAt.IsZero() {
		return false
	}
	if pushedAt.After(askedAt) {
		pushedAt = askedAt
	}
	e := &p.entries[i]
	if at := unixSeconds(askedAt); at > e.answered {
		e.answered = at
	}
	if !e.fed {
		e.fed = true
		p.fed++
		p.gained = append(p.gained, key)
	}
	was := changerate.Bin(e.est.Rate())
	known := !e.est.Seen().IsZero()
	e.est.Decay(askedAt)
	_, isNew := e.est.Count(askedAt, pushedAt)
	newPush = known && isNew
	if b := changerate.Bin(e.est.Rate()); b != was {
		p.hist.Remove(was)
		p.hist.Add(b)
		p.updates++
	}
	// Replan from the ask with what the answer taught.
	p.queue.items[e.pos].at = ceilSeconds(askedAt.Add(p.interval(e)))
	heap.Fix(&p.queue, int(e.pos))
	return newPush
}

// Fed says whether the forge answered for key within its FedMaxAge of
// now.
func (p *Planner) Fed(key string, now time.Time) bool {
	_, i := p.index.find(key, p.entries)
	return i >= 0 && p.fresh(&p.entries[i], now)
}

// fresh says whether e's last answer is within its FedMaxAge of now.
func (p *Planner) fresh(e *entry, now time.Time) bool {
	if e.answered == 0 {
		return false
	}
	age := p.opts.FedMaxAge
	if age == 0 {
		age = 2 * p.interval(e)
	}
	return now.Sub(time.Unix(int64(e.answered), 0)) <= age
}

// FedCount returns how many repositories Coverage last reported fed.
func (p *Planner) FedCount() int { return p.fed }

// Coverage returns the keys whose fed state changed since it last ran:
// gained, answered for when they were not fed; lost, whose last answer
// grew older than their FedMaxAge. Answers are reported at once; the
// search for old ones, which reads every repository, runs at most once a
// minute (it takes milliseconds at a million).
func (p *Planner) Coverage(now time.Time) (gained, lost []string) {
	gained, p.gained = p.gained, nil
	if !p.scanned.IsZero() && now.Sub(p.scanned) < coverageScan {
		return gained, nil
	}
	p.scanned = now
	for i := range p.entries {
		e := &p.entries[i]
		if e.pos < 0 || !e.fed || p.fresh(e, now) {
			continue
		}
		e.fed = false
		p.fed--
		lost = append(lost, e.key)
	}
	return gained, lost
}

// Interval returns how often key is asked about at the current price (0
// for an unknown key).
func (p *Planner) Interval(key string) time.Duration {
	_, i := p.index.find(key, p.entries)
	if i < 0 {
		return 0
	}
	return p.interval(&p.entries[i])
}

func (p *Planner) count(e *entry) {
	p.hist.Add(changerate.Bin(e.est.Rate()))
	p.updates++
}

func (p *Planner) uncount(e *entry) {
	p.hist.Remove(changerate.Bin(e.est.Rate()))
	p.updates++
}

// interval returns e's ask interval: the closed form for a Poisson source
// of its rate bin's rate at the current price, within [MinInterval,
// MaxInterval].
func (p *Planner) interval(e *entry) time.Duration {
	if !p.solved || p.updates > max(minResolve, p.index.n/8) {
		p.solve()
	}
	b := changerate.Bin(e.est.Rate())
	if p.intervals[b] == 0 {
		minX, maxX := p.opts.MinInterval.Seconds(), p.opts.MaxInterval.Seconds()
		p.intervals[b] = time.Duration(min(max(freshness.Interval(changerate.BinRate(b), p.mu), minX), maxX) * 1e9)
	}
	return p.intervals[b]
}

// solve finds the price at which the intervals of the counted rates spend
// the budget, and forgets the intervals of the last price.
func (p *Planner) solve() {
	p.solved, p.updates = true, 0
	p.mu = p.hist.Price(p.opts.PerHour/3600, p.opts.MinInterval.Seconds(), p.opts.MaxInterval.Seconds(), p.mu)
	p.intervals = [changerate.Bins]time.Duration{}
}

// queue is the heap (container/heap) of entries by due time; equal times
// go by entry number, so that the order is deterministic. It keeps each
// entry's pos.
type queue struct {
	items   []due
	entries *[]entry // the planner's
}

func (q *queue) Len() int { return len(q.items) }

func (q *queue) Less(a, b int) bool {
	da, db := q.items[a], q.items[b]
	if da.at != db.at {
		return da.at < db.at
	}
	return da.i < db.i
}

func (q *queue) Swap(a, b int) {
	q.items[a], q.items[b] = q.items[b], q.items[a]
	(*q.entries)[q.items[a].i].pos = int32(a)
	(*q.entries)[q.items[b].i].pos = int32(b)
}

func (q *queue) Push(x any) {
	d := x.(due)
	(*q.entries)[d.i].pos = int32(len(q.items))
	q.items = append(q.items, d)
}

func (q *queue) Pop() any {
	last := len(q.items) - 1
	d := q.items[last]
	q.items = q.items[:last]
	(*q.entries)[d.i].pos = -1
	return d
}
