package schedule

import "time"

// Hosts with a working feed.
//
// A forge's change feed tells the node of each push to a repository of its
// host (an urgent check), so background checks of those repositories only
// guard against a feed that misses something: one FedMaxInterval after the
// last successful check, whatever the policy would say. The adaptive
// policy leaves them out of its accounting (their rates do not price the
// others' checks, and each is planned one check a FedMaxInterval), so the
// budget they no longer need goes to the repositories of the other hosts.

// SetFed says whether the forge feed of hostName works: the node calls it
// when the coordinator says which hosts' feeds work or stop working. On a
// change it costs O(repositories of the host). When a host becomes fed,
// the background checks of its repositories wait for their safety net;
// when it stops being fed, they return to the policy at once: a repository
// that waits past the policy's next check from its last one is due then,
// or, when that is past, within one of its intervals from now (spread so
// that a whole host does not come due in one instant). Failing
// repositories keep their retry delay; urgent and running checks are left
// as they are.
func (s *Scheduler) SetFed(hostName string, fed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hostFor(hostName)
	if h.fed == fed {
		return
	}
	now := s.clk.Now()
	h.fed = fed
	if fed {
		s.fedLive += len(h.members)
	} else {
		s.fedLive -= len(h.members)
	}
	s.pol.hostFed(h)
	for _, r := range h.members {
		if r.fails > 0 {
			continue // its retry delay stands; the policy plans it at its next success
		}
		var iv time.Duration
		if !fed {
			iv = s.pol.first(r, now) // and the policy plans it again
		}
		if r.queue != waitingQueue && r.queue != readyQueue {
			continue
		}
		if fed {
			s.unqueue(r)
			due := r.lastCheck.Add(s.cfg.FedMaxInterval)
			if r.lastCheck.IsZero() {
				due = now.Add(time.Duration(s.spread() * float64(s.cfg.FedMaxInterval)))
			}
			s.toBackground(r, due, now)
			continue
		}
		due := now.Add(iv)
		if !r.lastCheck.IsZero() {
			due = r.lastCheck.Add(iv)
		}
		if due.Before(now) {
			due = now.Add(time.Duration(s.spread() * float64(iv)))
		}
		if !due.Before(r.notBefore) {
			continue
		}
		// Not toBackground: its deadline, often past by now, would make
		// the whole host due at once.
		s.unqueue(r)
		s.setDeadline(r, now)
		s.toWaiting(r, due)
	}
}

// join makes r one of h's repositories.
func (s *Scheduler) join(r *repo, h *host) {
	r.host = h
	r.hostIdx = len(h.members)
	h.members = append(h.members, r)
	if h.fed {
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
	if h.fed {
		s.fedLive--
	}
}
