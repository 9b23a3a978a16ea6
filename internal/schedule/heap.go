package schedule

import "time"

// queueKind says which ordering a repoHeap keeps and which of a repo's two
// position slots it uses.
type queueKind uint8

const (
	notQueued     queueKind = iota // running, or not scheduled
	addedQueue                     // just added, waiting for placeAdded
	urgentQueue                    // urgent lane: first asked, first served
	waitingQueue                   // background, not yet allowed: by notBefore
	readyQueue                     // background, allowed now: by policy rank
	deadlineQueue                  // background, allowed now: by MaxInterval deadline
)

// slot is the index into repo.pos: a repo sits in at most one of the
// urgent, waiting and ready queues (slot 0) and, while ready, also in the
// deadline queue (slot 1).
func (k queueKind) slot() int {
	if k == deadlineQueue {
		return 1
	}
	return 0
}

// repoHeap is a binary min-heap of repositories that records each one's
// position, so that a repository can be removed in O(log n).
type repoHeap struct {
	kind  queueKind
	items []*repo
}

func (h *repoHeap) len() int { return len(h.items) }

// countNotAfter counts the repositories of a deadline heap whose deadline
// is not after t, in time proportional to their number: a subtree whose
// root is after t holds none.
func (h *repoHeap) countNotAfter(t time.Time) int {
	n := 0
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h.items) || h.items[i].deadline.After(t) {
			continue
		}
		n++
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return n
}

func (h *repoHeap) top() *repo {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *repoHeap) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	switch h.kind {
	case urgentQueue:
		return a.urgentSeq < b.urgentSeq
	case waitingQueue:
		if !a.notBefore.Equal(b.notBefore) {
			return a.notBefore.Before(b.notBefore)
		}
	case readyQueue:
		if a.rank != b.rank {
			return a.rank < b.rank
		}
	case deadlineQueue:
		if !a.deadline.Equal(b.deadline) {
			return a.deadline.Before(b.deadline)
		}
	}
	return a.seq < b.seq
}

func (h *repoHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	s := h.kind.slot()
	h.items[i].pos[s] = i
	h.items[j].pos[s] = j
}

func (h *repoHeap) push(r *repo) {
	r.pos[h.kind.slot()] = len(h.items)
	h.items = append(h.items, r)
	h.up(len(h.items) - 1)
}

// remove takes r out of the heap; r must be in it.
func (h *repoHeap) remove(r *repo) {
	i := r.pos[h.kind.slot()]
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	r.pos[h.kind.slot()] = -1
}

func (h *repoHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *repoHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}
