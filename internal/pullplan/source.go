package pullplan

import (
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Where a pull takes a repository from, on the full tier. A full node that
// is to hold a repository it lacks (it joined, or it is a lost replica's
// new one) copies it from a peer, a replica on another full node, and
// checks the copy against the owner's verified digest: the owners and the
// upstreams are not asked for its objects again. So is one whose copy has
// differed from the verified digest for RepairAfter, when a pull from the
// owner in between did not bring it there (the owner's own copy is off, or
// unreachable): it is repaired from a peer that serves the verified state.
// Otherwise a pull comes from the owner, as always. A peer copy that finds
// no peer with the verified state falls back to the owner (the shell's).
//
// Peer copies are paced (--full-move-concurrency): a pull that is to copy
// from a peer while every slot is taken waits for one (WaitMove), off the
// queue, so that the pulls from owners go on; each freed slot releases the
// key that waited longest (MoveFreed).

// DefaultRepairAfter is how long a repository's copy may differ from the
// verified digest before a peer repairs it: well past a pull's time
// (RetryLimit's backoff, a clone of a large repository).
const DefaultRepairAfter = 5 * time.Minute

// Source is where a pull takes a repository from.
type Source uint8

const (
	// FromOwner: the owner, through its tunnel, verified against the
	// upstream.
	FromOwner Source = iota
	// FromPeer: a replica on another full node, verified against the
	// owner's digest, falling back to the owner.
	FromPeer
)

func (s Source) String() string {
	if s == FromPeer {
		return "peer"
	}
	return "owner"
}

// divergence is a repository whose copy differs from the verified digest:
// since when, and whether a pull from the owner ended since without
// bringing the copy there.
type divergence struct {
	since      time.Time
	verified   string
	ownerTried bool
}

// diverge follows state s, seen at now: a copy held (s.Served) that
// differs from the owner's digest starts (or goes on) diverging; a new
// verified digest starts it again; one that agrees, or a key not pulled
// here, stops.
func (p *Plan) diverge(s State, now time.Time) {
	if s.Own || s.Elsewhere || s.Owner == 0 || s.Digest == "" || s.Served == "" || s.Served == s.Digest {
		delete(p.diverged, s.Key)
		return
	}
	if d := p.diverged[s.Key]; d != nil && d.verified == s.Digest {
		return
	}
	p.diverged[s.Key] = &divergence{since: now, verified: s.Digest}
}

// Source says where key's pull, picked by Next, takes it from at now:
// held is whether the mirror holds key. See the top of this file.
func (p *Plan) Source(key repokey.Key, held bool, now time.Time) Source {
	if !held {
		return FromPeer
	}
	if d := p.diverged[key]; d != nil && d.ownerTried && now.Sub(d.since) >= p.cfg.RepairAfter {
		return FromPeer
	}
	return FromOwner
}

// Serves follows a pull of key from src that ended at now (whether it
// worked or not), the mirror serving digest served after it: a copy that
// now agrees with the verified digest stops diverging; one that a pull
// from the owner left off is repaired from a peer RepairAfter after it
// started to differ (Ended queues it then); one a peer left off (no peer
// had the verified state) starts its wait again.
func (p *Plan) Serves(key repokey.Key, served string, src Source, now time.Time) {
	d := p.diverged[key]
	if d == nil {
		return
	}
	switch {
	case served == d.verified:
		delete(p.diverged, key)
	case src == FromOwner:
		d.ownerTried = true
	default:
		d.since, d.ownerTried = now, false
	}
}

// repairDue queues e, whose pull just ended, for the repair of its
// diverging copy, when a pull from the owner did not fix it.
func (p *Plan) repairDue(e *entry) {
	if d := p.diverged[e.key]; d != nil && d.ownerTried && !e.pending {
		p.want(e, d.since.Add(p.cfg.RepairAfter))
	}
}

// Diverging tells whether key's copy differs from the verified digest.
func (p *Plan) Diverging(key repokey.Key) bool { return p.diverged[key] != nil }

// WaitMove makes key, picked by Next to copy from a peer while every
// peer copy's slot is taken, wait for one (MoveFreed), off the queue.
func (p *Plan) WaitMove(key repokey.Key) {
	e := p.stop(key)
	if e == nil {
		return
	}
	if e.pending { // a state seen meanwhile: the wait covers it
		p.unwant(e)
	}
	e.moveWait = true
	p.moves = append(p.moves, key)
}

// MoveFreed follows the end of a peer copy: the key that waited longest
// for a slot is queued at once. It reports the key (false: none waits).
func (p *Plan) MoveFreed() (repokey.Key, bool) {
	for len(p.moves) > 0 {
		k := p.moves[0]
		p.moves[0] = ""
		p.moves = p.moves[1:]
		if e := p.keys[k]; e != nil && e.moveWait {
			e.moveWait = false
			p.want(e, time.Time{})
			return k, true
		}
	}
	p.moves = nil // its array's start is freed too
	return "", false
}
