package node

import (
	"container/heap"
	"time"

	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// maintPlan decides which mirror to maintain next (pure: it is fed the
// mirrors that became candidates, what a probe of each found, and the runs'
// ends; it does no I/O). A mirror becomes a candidate when something wrote
// to it (a fetch, a pull, a repair) or the integrity scan read it, never by a
// walk of every mirror. Candidates are probed in the order they came, a few
// at a time; those that need no run are dropped (the next fetch makes them
// candidates again), the others wait, the most in need first. A mirror is
// maintained by one lane at a time; one noted again while it runs is probed
// again after.
type maintPlan struct {
	queue   []repokey.Key        // candidates to probe, oldest first
	queued  map[repokey.Key]bool // the keys in queue
	ready   maintHeap            // probed and due, the most in need first
	items   map[repokey.Key]*maintItem
	running map[repokey.Key]bool // key -> noted again while it ran
}

type maintItem struct {
	key   repokey.Key
	need  mirror.Need
	index int
}

func newMaintPlan() *maintPlan {
	return &maintPlan{queued: map[repokey.Key]bool{}, items: map[repokey.Key]*maintItem{}, running: map[repokey.Key]bool{}}
}

// note makes key a candidate.
func (p *maintPlan) note(key repokey.Key) {
	if _, ok := p.running[key]; ok {
		p.running[key] = true
		return
	}
	if !p.queued[key] {
		p.queued[key] = true
		p.queue = append(p.queue, key)
	}
}

// toProbe takes up to n candidates to probe, oldest first.
func (p *maintPlan) toProbe(n int) []repokey.Key {
	n = min(n, len(p.queue))
	keys := append([]repokey.Key(nil), p.queue[:n]...)
	p.queue = p.queue[n:]
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	}
	for _, k := range keys {
		delete(p.queued, k)
	}
	return keys
}

// probed records what a probe of key found: a mirror in need waits for a
// lane, one without is dropped.
func (p *maintPlan) probed(key repokey.Key, need mirror.Need) {
	if _, ok := p.running[key]; ok {
		return // probed while a lane ran it: done will queue it again
	}
	it, ok := p.items[key]
	switch {
	case !need.Due() && ok:
		p.forget(key)
	case !need.Due():
	case ok:
		it.need = need
		heap.Fix(&p.ready, it.index)
	default:
		it = &maintItem{key: key, need: need}
		p.items[key] = it
		heap.Push(&p.ready, it)
	}
}

// forget drops key from the waiting mirrors (gone, or in no need).
func (p *maintPlan) forget(key repokey.Key) {
	if it, ok := p.items[key]; ok {
		heap.Remove(&p.ready, it.index)
		delete(p.items, key)
	}
}

// take gives a lane the mirror most in need, if one waits.
func (p *maintPlan) take() (repokey.Key, mirror.Need, bool) {
	if len(p.ready) == 0 {
		return "", mirror.Need{}, false
	}
	it := heap.Pop(&p.ready).(*maintItem)
	delete(p.items, it.key)
	p.running[it.key] = false
	return it.key, it.need, true
}

// done records the end of key's run; a key noted meanwhile is a candidate
// again.
func (p *maintPlan) done(key repokey.Key) {
	again := p.running[key]
	delete(p.running, key)
	if again {
		p.note(key)
	}
}

// candidates is how many mirrors wait for a probe or a lane.
func (p *maintPlan) candidates() int { return len(p.queue) + len(p.ready) }

// dutyWait is how long a lane whose last run started at lastStart and took
// lastDur waits before the next, so that it runs at most duty of the time.
func dutyWait(lastStart time.Time, lastDur time.Duration, duty float64, now time.Time) time.Duration {
	if lastStart.IsZero() || duty <= 0 || duty >= 1 {
		return 0
	}
	next := lastStart.Add(time.Duration(float64(lastDur) / duty))
	return max(next.Sub(now), 0)
}

type maintHeap []*maintItem

func (h maintHeap) Len() int { return len(h) }
func (h maintHeap) Less(i, j int) bool {
	if h[i].need.Score != h[j].need.Score {
		return h[i].need.Score > h[j].need.Score
	}
	return h[i].key < h[j].key
}
func (h maintHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *maintHeap) Push(x any) {
	it := x.(*maintItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *maintHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
