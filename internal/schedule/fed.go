package schedule

import (
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Fed repositories.
//
// A forge's change feed tells the node of each push to a repository it
// covers (an urgent check), so background checks of those repositories
// only guard against a feed that misses something: one FedMaxInterval
// after the last successful check, whatever the policy would say. The
// adaptive policy leaves them out of its accounting (their rates do not
// price the others' checks, and each is planned one check a
// FedMaxInterval), so the budget they no longer need goes to the others.
//
// A repository is fed only when both hold: its host's feed works (SetFed)
// and the feed answered for this repository lately (SetAnswered). A feed
// that works for its host may still never ask about a repository (a path
// its forge cannot name) or get no answer for it: that repository is
// checked as any other.

// SetFed says whether the forge feed of hostName works: the node calls it
// when the coordinator says which hosts' feeds work or stop working. On a
// change it costs O(repositories of the host). When a host becomes fed,
// the background checks of its repositories that the feed answered for
// wait for their safety net; when it stops being fed, they return to the
// policy at once (see refed).
func (s *Scheduler) SetFed(hostName string, fed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hostFor(hostName)
	if h.fed == fed {
		return
	}
	now := s.clk.Now()
	h.fed = fed
	for _, r := range h.members {
		if r.answered {
			s.refed(r, now)
		}
	}
}

// SetAnswered says whether the coordinator's forge feed answered for key
// within its fed max age: the node calls it with each assignment of key.
// Unknown keys are ignored. A change of whether key is fed reschedules it
// as SetFed does.
func (s *Scheduler) SetAnswered(key repokey.Key, answered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[key]
	if r == nil || r.removed || r.answered == answered {
		return
	}
	if !r.host.fed {
		r.answered = answered // not fed either way
		return
	}
	r.answered = answered
	s.refed(r, s.clk.Now())
}

// refed reschedules r, whose r.fed() just changed. When it became fed, its
// background check waits for its safety net; when it stopped being fed, it
// returns to the policy at once: a repository that waits past the policy's
// next check from its last one is due then, or, when that is past, within
// one of its intervals from now (spread so that a whole host does not come
// due in one instant). A failing repository keeps its retry delay; urgent
// and running checks are left as they are.
func (s *Scheduler) refed(r *repo, now time.Time) {
	fed := r.fed()
	if fed {
		s.fedLive++
	} else {
		s.fedLive--
	}
	s.pol.repoFed(r)
	if r.fails > 0 {
		return // its retry delay stands; the policy plans it at its next success
	}
	var iv time.Duration
	if !fed {
		iv = s.pol.first(r, now) // and the policy plans it again
	}
	if r.queue != waitingQueue && r.queue != readyQueue {
		return
	}
	if fed {
		s.unqueue(r)
		due := r.lastCheck.Add(s.cfg.FedMaxInterval)
		if r.lastCheck.IsZero() {
			due = now.Add(time.Duration(s.spread() * float64(s.cfg.FedMaxInterval)))
		}
		s.toBackground(r, due, now)
		return
	}
	due := now.Add(iv)
	if !r.lastCheck.IsZero() {
		due = r.lastCheck.Add(iv)
	}
	if due.Before(now) {
		due = now.Add(time.Duration(s.spread() * float64(iv)))
	}
	if !due.Before(r.notBefore) {
		return
	}
	// Not toBackground: its deadline, often past by now, would make the
	// whole host due at once.
	s.unqueue(r)
	s.setDeadline(r, now)
	s.toWaiting(r, due)
}

// fed says whether r is left to a forge's feed: its host's feed works and
// answered for it lately.
func (r *repo) fed() bool { return r.answered && r.host.fed }

// join makes r one of h's repositories.
func (s *Scheduler) join(r *repo, h *host) {
	r.host = h
	r.hostIdx = len(h.members)
	h.members = append(h.members, r)
	if r.fed() {
		s.fedLive++
	}
}

// leave takes r out of its host's repositories; r.host stays, for a check
// that is running.
func (s *Scheduler) leave(r *repo) {
	h := r.host
	last := len(h.members) - 1
	moved := h.members[last]
	h.members[r.hostIdx] = moved
	moved.hostIdx = r.hostIdx
	h.members[last] = nil
	h.members = h.members[:last]
	r.hostIdx = -1
	if r.fed() {
		s.fedLive--
	}
}
