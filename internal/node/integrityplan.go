package node

import (
	"container/heap"
	"math"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// integrityPlan decides which mirror's integrity to check next and when
// (pure: it is fed the set of mirrors, results and the time, and does no
// I/O). Each mirror is checked about once per interval, the oldest first,
// one at a time, spaced evenly over the interval, and never more often
// than keeps the scan busy for maxDuty of the time (after a check that
// took d, the next starts at least d/maxDuty after it started). A mirror
// can be asked for at once (a public clone of it failed on its objects),
// but not more than once per urgentIntegrityGap.
type integrityPlan struct {
	interval time.Duration
	maxDuty  float64

	items   map[repokey.Key]*integrityItem
	queue   integrityHeap
	adds    int
	lastEnd time.Time     // when the last check ended
	lastDur time.Duration // how long it took
	// regularStart is when the last check of a key that was not urgent
	// began: the gap runs from it, so that urgent checks (a repair's
	// retries, every minute) do not push the scan back.
	regularStart time.Time
}

type integrityItem struct {
	key    repokey.Key
	due    time.Time
	last   time.Time // last check (zero: never)
	urgent bool
	index  int
}

const urgentIntegrityGap = 10 * time.Minute

func newIntegrityPlan(interval time.Duration, maxDuty float64) *integrityPlan {
	if maxDuty <= 0 || maxDuty > 1 {
		maxDuty = 0.1
	}
	return &integrityPlan{interval: interval, maxDuty: maxDuty, items: map[repokey.Key]*integrityItem{}}
}

// add starts checking key. last is its last check (zero: unknown):
// a mirror never checked becomes due at a point spread over the next
// interval, so that a node that starts with many mirrors does not check
// them all at once.
func (p *integrityPlan) add(key repokey.Key, last, now time.Time) {
	if _, ok := p.items[key]; ok {
		return
	}
	it := &integrityItem{key: key, last: last}
	if last.IsZero() {
		p.adds++
		_, frac := math.Modf(float64(p.adds) * 0.6180339887498949)
		it.due = now.Add(time.Duration(frac * float64(p.interval)))
	} else {
		it.due = last.Add(p.interval)
	}
	p.items[key] = it
	heap.Push(&p.queue, it)
}

// remove stops checking key.
func (p *integrityPlan) remove(key repokey.Key) {
	it, ok := p.items[key]
	if !ok {
		return
	}
	heap.Remove(&p.queue, it.index)
	delete(p.items, key)
}

// urgent makes key due at once, unless it was checked within
// urgentIntegrityGap. It reports whether it did.
func (p *integrityPlan) urgent(key repokey.Key, now time.Time) bool {
	it, ok := p.items[key]
	if !ok || it.urgent || (!it.last.IsZero() && now.Sub(it.last) < urgentIntegrityGap) {
		return false
	}
	it.urgent, it.due = true, now
	heap.Fix(&p.queue, it.index)
	return true
}

// retry makes key due again after d (a repair that failed), as an urgent
// key: it waits for d and the duty bound, not for the gap that spreads the
// other mirrors over the interval (an hour and more with a few hundred
// mirrors), while the mirror it names is not served.
func (p *integrityPlan) retry(key repokey.Key, now time.Time, d time.Duration) {
	if it, ok := p.items[key]; ok {
		it.due, it.urgent = now.Add(d), true
		heap.Fix(&p.queue, it.index)
	}
}

// gap is the least time between the start of two checks: the
// interval shared by every mirror, or the duty bound.
func (p *integrityPlan) gap() time.Duration {
	g := time.Duration(0)
	if n := len(p.items); n > 0 {
		g = p.interval / time.Duration(n)
	}
	return max(g, p.dutyGap())
}

// dutyGap is the least time between the start of the last check and the
// next one that keeps the scan's share of the time under maxDuty.
func (p *integrityPlan) dutyGap() time.Duration {
	return time.Duration(float64(p.lastDur) / p.maxDuty)
}

// next returns the key to check now, or how long to wait. An urgent key
// waits only for the duty bound. An urgent key not due yet (a repair's
// retry) does not hold up the rest of the scan: a regular key that can
// start sooner goes first.
func (p *integrityPlan) next(now time.Time) (repokey.Key, bool, time.Duration) {
	if len(p.queue) == 0 {
		return "", false, p.interval
	}
	it := p.queue[0]
	start := p.start(it)
	if it.urgent && start.After(now) {
		for _, o := range p.queue {
			if o.urgent {
				continue
			}
			if s := p.start(o); s.Before(start) {
				it, start = o, s
			}
		}
	}
	if start.After(now) {
		return "", false, start.Sub(now)
	}
	return it.key, true, 0
}

// start is when it may be checked: when it is due, no sooner than the
// duty bound after the last check began, and, unless it is urgent, no
// sooner than the gap after the last check of a key that was not.
func (p *integrityPlan) start(it *integrityItem) time.Time {
	start := it.due
	if !p.lastEnd.IsZero() {
		lastStart := p.lastEnd.Add(-p.lastDur)
		start = maxTime(start, lastStart.Add(p.dutyGap()))
		if !it.urgent && !p.regularStart.IsZero() {
			start = maxTime(start, p.regularStart.Add(p.gap()))
		}
	}
	return start
}

// done records a check of key that ended at now after d.
func (p *integrityPlan) done(key repokey.Key, now time.Time, d time.Duration) {
	p.lastEnd, p.lastDur = now, d
	if it, ok := p.items[key]; ok {
		if !it.urgent {
			p.regularStart = now.Add(-d)
		}
		it.last, it.urgent = now, false
		it.due = now.Add(p.interval)
		heap.Fix(&p.queue, it.index)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

type integrityHeap []*integrityItem

func (h integrityHeap) Len() int { return len(h) }
func (h integrityHeap) Less(i, j int) bool {
	if h[i].urgent != h[j].urgent {
		return h[i].urgent
	}
	return h[i].due.Before(h[j].due)
}
func (h integrityHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *integrityHeap) Push(x any) {
	it := x.(*integrityItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *integrityHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
