package schedule

import (
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// MaxInterval is the longest a repository may go unchecked (the
// configured one, or its default).
func (s *Scheduler) MaxInterval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.MaxInterval
}

// LastCheck is when key was last checked successfully (zero if never, or
// if it is not scheduled).
func (s *Scheduler) LastCheck(key repokey.Key) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.repos[key]; r != nil {
		return r.lastCheck
	}
	return time.Time{}
}

// Due is when key's next check may start (a background check waits for a
// slot, the budget and its host from then on): now for a repository being
// checked or asked for; false when key is not scheduled.
func (s *Scheduler) Due(key repokey.Key) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	s.placeAdded(now)
	r := s.repos[key]
	switch {
	case r == nil || r.removed:
		return time.Time{}, false
	case r.running || r.queue == urgentQueue:
		return now, true
	}
	return r.notBefore, true
}
