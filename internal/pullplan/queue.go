package pullplan

// queue is a binary min-heap of the entries waiting for a pull, by due
// time and then by arrival; each entry knows its index (entry.at), so that
// a removal or a change of due time is O(log n) too.
type queue []*entry

func (q queue) less(i, j int) bool {
	a, b := q[i], q[j]
	if !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.seq < b.seq
}

func (q queue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].at, q[j].at = i, j
}

func (q *queue) push(e *entry) {
	e.at = len(*q)
	*q = append(*q, e)
	q.up(e.at)
}

// remove takes out the entry at i.
func (q *queue) remove(i int) {
	old := *q
	n := len(old) - 1
	e := old[i]
	if i != n {
		old.swap(i, n)
	}
	old[n] = nil
	*q = old[:n]
	if i != n {
		q.fix(i)
	}
	e.at = -1
}

// fix restores the order after the due time of the entry at i changed.
func (q queue) fix(i int) {
	if !q.down(i) {
		q.up(i)
	}
}

func (q queue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down sinks the entry at i and reports whether it moved.
func (q queue) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q.swap(i, m)
		i = m
	}
	return i > start
}
