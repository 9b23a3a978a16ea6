package mirror

import (
	"path/filepath"
	"sync"
)

// retiredSize remembers the size of <data>/removed, so that it is walked
// again only after it changed. gen counts the changes (a mirror retired,
// brought back, or swept); walked is gen+1 of the last walk (0: none).
type retiredSize struct {
	mu     sync.Mutex
	gen    uint64
	walked uint64
	bytes  int64
}

// retiredChanged notes that <data>/removed changed.
func (s *Store) retiredChanged() {
	s.retired.mu.Lock()
	s.retired.gen++
	s.retired.mu.Unlock()
}

// RetiredSize is the disk that the retired mirrors take (<data>/removed,
// what a full node keeps for --retention). The directory is walked only
// when a mirror was retired, brought back or swept since the last walk;
// otherwise the last size is returned.
func (s *Store) RetiredSize() int64 {
	r := &s.retired
	r.mu.Lock()
	gen := r.gen
	if r.walked == gen+1 {
		defer r.mu.Unlock()
		return r.bytes
	}
	r.mu.Unlock()
	n, _ := TreeSize(filepath.Join(filepath.Dir(s.root), "removed")) // what it could read
	r.mu.Lock()
	if r.gen == gen { // nothing changed during the walk
		r.walked, r.bytes = gen+1, n
	}
	r.mu.Unlock()
	return n
}
