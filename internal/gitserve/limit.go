package gitserve

import "sync"

// limiter caps the upload-pack runs in flight, in all and per client
// address. A zero cap is no cap. It is safe for concurrent use.
type limiter struct {
	global, perClient int

	mu       sync.Mutex
	total    int
	byClient map[string]int
}

// acquire takes a slot for client. It fails at once, saying which cap was
// hit, rather than queueing: a queue would hold connections open instead.
func (l *limiter) acquire(client string) (release func(), perClientFull, globalFull bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perClient > 0 && l.byClient[client] >= l.perClient {
		return nil, true, false
	}
	if l.global > 0 && l.total >= l.global {
		return nil, false, true
	}
	if l.byClient == nil {
		l.byClient = map[string]int{}
	}
	l.total++
	l.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.byClient[client]--; l.byClient[client] <= 0 {
				delete(l.byClient, client)
			}
		})
	}, false, false
}
