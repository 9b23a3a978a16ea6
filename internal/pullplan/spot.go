package pullplan

import (
	"container/heap"
	"iter"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Spot checks ask the upstreams of repositories that no hint names, the
// oldest verified_at first, at --spot-check-per-hour: they find an owner
// that is frozen without anyone hearing of a push.

// OldestVerified returns up to n keys that pass keep, the oldest
// verified_at first (never verified: 0, first of all), from all (key and
// verified_at in unix seconds): a bounded heap, O(len(all) log n).
func OldestVerified(all iter.Seq2[repokey.Key, uint32], n int, keep func(repokey.Key) bool) []repokey.Key {
	if n <= 0 {
		return nil
	}
	h := &spotHeap{}
	for k, v := range all {
		if h.Len() == n && v >= (*h)[0].at {
			continue
		}
		if !keep(k) {
			continue
		}
		if h.Len() == n {
			heap.Pop(h)
		}
		heap.Push(h, spotItem{k, v})
	}
	out := make([]repokey.Key, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(spotItem).key
	}
	return out
}

type spotItem struct {
	key repokey.Key
	at  uint32
}

// spotHeap is a max-heap on at (the newest of the oldest n on top); ties
// by key, so that a choice is deterministic.
type spotHeap []spotItem

func (h spotHeap) Len() int { return len(h) }
func (h spotHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at > h[j].at
	}
	return h[i].key > h[j].key
}
func (h spotHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *spotHeap) Push(x any)   { *h = append(*h, x.(spotItem)) }
func (h *spotHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// SpotGap is the time between two spot checks at perHour an hour (0: none).
func SpotGap(perHour int) time.Duration {
	if perHour <= 0 {
		return 0
	}
	return time.Hour / time.Duration(perHour)
}
