package gitserve

// fairQueue orders the requests that wait: a line per client address,
// oldest first, and the clients taken in turn, so that one client's many
// waiting requests do not starve another client's one. It bounds the
// requests waiting in all, and the bytes that one client's waiting
// requests hold. It is pure (no lock, no clock, no I/O): its owner
// serializes the calls and does the waiting (see clientShares and
// runSlots).
type fairQueue struct {
	maxLen   int   // requests waiting in all (0: none may wait)
	maxBytes int64 // bytes one client's waiting requests hold (0: no bound)

	lines map[string]*line
	ring  []string // the clients with a line, in turn order
	next  int      // index in ring of the client whose turn is next
	n     int      // requests waiting
}

// line is one client's waiting requests, oldest first.
type line struct {
	waiting []*waiter
	bytes   int64
}

// waiter is one waiting request. The queue reads client, repo and size;
// its owner keeps the rest.
type waiter struct {
	client string
	repo   string // what a run is for (the run queue)
	size   int64  // bytes it holds while it waits (its body)

	done   chan struct{} // closed once it is granted or bumped
	bumped bool          // it lost its place, rather than being granted
}

// push queues w at the end of its client's line. When the queue is full,
// the client with the most requests waiting gives up its newest (bumped)
// to make room, provided that it has at least two more waiting than w's
// client: one address cannot keep every other out of the queue. ok is
// false when w may not wait: the queue is full, or w's client's waiting
// requests would hold more than maxBytes.
func (q *fairQueue) push(w *waiter) (bumped *waiter, ok bool) {
	if q.maxLen <= 0 {
		return nil, false
	}
	var mine int
	var held int64
	if own := q.lines[w.client]; own != nil {
		mine, held = len(own.waiting), own.bytes
	}
	if q.maxBytes > 0 && held+w.size > q.maxBytes {
		return nil, false
	}
	if q.n >= q.maxLen {
		longest := q.longest()
		if longest == "" || len(q.lines[longest].waiting) < mine+2 {
			return nil, false
		}
		l := q.lines[longest]
		bumped = l.waiting[len(l.waiting)-1]
		q.drop(longest, len(l.waiting)-1)
	}
	l := q.lines[w.client]
	if l == nil {
		if q.lines == nil {
			q.lines = map[string]*line{}
		}
		l = &line{}
		q.lines[w.client] = l
		// A new client's turn comes last in the round under way.
		q.ring = append(q.ring, "")
		copy(q.ring[q.next+1:], q.ring[q.next:])
		q.ring[q.next] = w.client
		q.next++
		if q.next == len(q.ring) {
			q.next = 0
		}
	}
	l.waiting = append(l.waiting, w)
	l.bytes += w.size
	q.n++
	return bumped, true
}

// longest is the client with the most requests waiting, the first such
// in turn order ("": none).
func (q *fairQueue) longest() string {
	best, most := "", 0
	for i := range q.ring {
		c := q.ring[(q.next+i)%len(q.ring)]
		if n := len(q.lines[c].waiting); n > most {
			best, most = c, n
		}
	}
	return best
}

// drop takes the i-th waiter out of client's line, and the client out of
// the ring when its line is empty.
func (q *fairQueue) drop(client string, i int) {
	l := q.lines[client]
	l.bytes -= l.waiting[i].size
	l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
	q.n--
	if len(l.waiting) > 0 {
		return
	}
	delete(q.lines, client)
	for j, c := range q.ring {
		if c != client {
			continue
		}
		q.ring = append(q.ring[:j], q.ring[j+1:]...)
		if j < q.next {
			q.next--
		}
		if q.next >= len(q.ring) {
			q.next = 0
		}
		return
	}
}

// remove takes w out of the queue (it gave up). It reports false when w
// is not waiting: it was granted or bumped already.
func (q *fairQueue) remove(w *waiter) bool {
	l := q.lines[w.client]
	if l == nil {
		return false
	}
	for i, x := range l.waiting {
		if x == w {
			q.drop(w.client, i)
			return true
		}
	}
	return false
}

// first takes client's oldest waiting request (nil: none waits).
func (q *fairQueue) first(client string) *waiter {
	l := q.lines[client]
	if l == nil {
		return nil
	}
	w := l.waiting[0]
	q.drop(client, 0)
	return w
}

// take takes the oldest request that fits of the client whose turn it is,
// or else of the clients after it in turn; the turn then passes to the
// client after the one served. It returns nil when no request fits.
func (q *fairQueue) take(fits func(*waiter) bool) *waiter {
	for i := range q.ring {
		at := (q.next + i) % len(q.ring)
		client := q.ring[at]
		for j, w := range q.lines[client].waiting {
			if !fits(w) {
				continue
			}
			q.next = (at + 1) % len(q.ring)
			q.drop(client, j)
			return w
		}
	}
	return nil
}

// len is the number of requests waiting.
func (q *fairQueue) len() int { return q.n }
