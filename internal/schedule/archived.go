package schedule

import (
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Archived repositories.
//
// A forge marks a repository archived when its owner made it read-only: it
// will not change until unarchived, so its background checks come one
// ArchivedInterval after the last successful one, whatever the policy or
// a feed would say. An urgent check (a push a feed saw, an on-demand
// check) comes as for any other repository: an unarchived repository that
// is pushed to is seen at once where a feed covers it, and within
// ArchivedInterval otherwise. Only the node's word makes a repository
// archived (the coordinator's, from the forge's API): an upstream's git
// answers never do, so a hostile forge answer can slow a repository's
// checks, and change nothing else.

// SetArchived says whether the forge marks key archived: the node calls
// it with each assignment of key. Unknown keys are ignored. On a change,
// a repository waiting for its background check is due again: one
// ArchivedInterval after its last success when it became archived, or
// within its policy interval from now when it stopped being archived. A
// failing repository keeps its retry delay; urgent and running checks are
// left as they are.
func (s *Scheduler) SetArchived(key repokey.Key, archived bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[key]
	if r == nil || r.removed || r.archived == archived {
		return
	}
	r.archived = archived
	now := s.clk.Now()
	if r.fails > 0 || (r.queue != waitingQueue && r.queue != readyQueue) {
		s.setDeadline(r, now)
		return
	}
	s.unqueue(r)
	if archived {
		due := r.lastCheck.Add(s.cfg.ArchivedInterval)
		if r.lastCheck.IsZero() {
			due = now.Add(time.Duration(s.spread() * float64(s.cfg.ArchivedInterval)))
		}
		s.toBackground(r, due, now)
		return
	}
	iv := s.pol.first(r, now)
	s.setDeadline(r, now)
	s.toWaiting(r, now.Add(time.Duration(s.spread()*float64(iv))))
}
