package pullplan

import (
	"math"
	"time"
)

// queue is a binary min-heap of the entries waiting for a pull, by due
// time and then by arrival; each entry knows its index (entry.at), so that
// a removal or a change of due time is O(log n) too. A slot holds what the
// order needs, so that sifting reads the slice alone, not the entries.
type queue []slot

type slot struct {
	due int64 // unix nanoseconds (dueKey)
	seq uint64
	e   *entry
}

// dueKey is t for the order: the zero time (at once) first of all.
func dueKey(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// before tells whether a comes out before b.
func (a slot) before(b slot) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

// top is the entry due first; the queue must not be empty.
func (q queue) top() *entry { return q[0].e }

// push adds e, due at due (dueKey), arrived seq-th.
func (q *queue) push(e *entry, due int64, seq uint64) {
	*q = append(*q, slot{due, seq, e})
	q.up(len(*q) - 1)
}

// remove takes out the entry at i.
func (q *queue) remove(i int) {
	old := *q
	n := len(old) - 1
	e := old[i].e
	last := old[n]
	old[n] = slot{}
	*q = old[:n]
	if i != n {
		(*q)[i] = last
		q.sift(i)
	}
	e.at = -1
}

// fix makes the entry at i due at due.
func (q queue) fix(i int, due int64) {
	q[i].due = due
	q.sift(i)
}

func (q queue) sift(i int) {
	if !q.down(i) {
		q.up(i)
	}
}

// The heap is 4-ary (children of i: 4i+1 to 4i+4): half the levels of a
// binary one, whose children's slots share a cache line or two. A slot
// moves up or down into the hole its neighbour left, and each entry moved
// learns its index once.

func (q queue) up(i int) {
	s := q[i]
	for i > 0 {
		parent := (i - 1) / 4
		if !s.before(q[parent]) {
			break
		}
		q[i] = q[parent]
		q[i].e.at = int32(i)
		i = parent
	}
	q[i] = s
	s.e.at = int32(i)
}

// down sinks the entry at i and reports whether it moved.
func (q queue) down(i int) bool {
	start, s := i, q[i]
	for {
		first := 4*i + 1
		if first >= len(q) {
			break
		}
		m := first
		for c := first + 1; c < min(first+4, len(q)); c++ {
			if q[c].before(q[m]) {
				m = c
			}
		}
		if !q[m].before(s) {
			break
		}
		q[i] = q[m]
		q[i].e.at = int32(i)
		i = m
	}
	q[i] = s
	s.e.at = int32(i)
	return i > start
}
