package schedule

import (
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// PersistedRepo is the part of a repository's schedule that a node saves so
// that a restarted scheduler resumes its schedule instead of checking
// everything at once. What the adaptive policy has learned is not in it: it
// is rebuilt from the change history given to Add.
type PersistedRepo struct {
	Key       repokey.Key
	Urgent    bool          // waiting in (or due back to) the urgent lane
	Due       time.Time     // next background check
	LastCheck time.Time     // last successful check
	Rank      float64       // compass: the priority
	Interval  time.Duration // sourcegraph: the last interval
	Failures  int           // failures in a row
	NotFound  int           // NotFound answers in a row
}

// Snapshot returns the schedule of every repository, sorted by key. A
// repository being checked is saved as due now.
func (s *Scheduler) Snapshot() []PersistedRepo {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	s.placeAdded(now)
	out := make([]PersistedRepo, 0, s.live)
	for _, r := range s.repos {
		if r.removed {
			continue
		}
		p := PersistedRepo{
			Key:       r.key,
			Urgent:    r.queue == urgentQueue || r.urgentAgain,
			Due:       r.notBefore,
			LastCheck: r.lastCheck,
			Rank:      r.rank,
			Interval:  r.interval,
			Failures:  r.fails,
			NotFound:  r.notFound,
		}
		if r.running || p.Urgent {
			p.Due = now
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PersistedRepo) int { return strings.Compare(string(a.Key), string(b.Key)) })
	return out
}

// Restore applies a saved schedule to the repositories already added (the
// node adds them first, with their history, then restores): each resumes at
// its saved due time, so a restart does not make everything due at once.
// Entries for keys not added, or being checked, are skipped. It returns how
// many were applied.
func (s *Scheduler) Restore(saved []PersistedRepo) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	n := 0
	for _, p := range saved {
		r := s.repos[p.Key]
		if r == nil || r.removed || r.running {
			continue
		}
		n++
		if r.queue == addedQueue {
			s.pol.first(r, now) // let the policy count it as planned
		}
		s.unqueue(r)
		r.lastCheck = later(r.lastCheck, p.LastCheck)
		r.fails, r.interval = p.Failures, p.Interval
		s.setNotFound(r, p.NotFound)
		if s.pol.ranks() {
			r.rank = p.Rank
		}
		if p.Urgent {
			s.toUrgent(r)
			continue
		}
		s.toBackground(r, p.Due, now)
	}
	return n
}
