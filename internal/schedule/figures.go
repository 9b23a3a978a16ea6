package schedule

import "time"

// MaxInterval is the longest a repository may go unchecked (the
// configured one, or its default).
func (s *Scheduler) MaxInterval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.MaxInterval
}

// LastCheck is when key was last checked successfully (zero if never, or
// if it is not scheduled).
func (s *Scheduler) LastCheck(key string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.repos[key]; r != nil {
		return r.lastCheck
	}
	return time.Time{}
}
