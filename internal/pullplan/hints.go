package pullplan

import (
	"cmp"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// The full node vouches for freshness itself (issue 22): verified_at is
// when it last saw the upstream's refs equal to what it serves. This file
// is the book of change hints that weighs an owner's reports against the
// pushes heard of: which upstream to ask now, and which report is stale.

// hint is an upstream change that the full node heard of (a webhook, a
// forge feed, or its own check that found the upstream ahead) and has not
// yet seen settled.
type hint struct {
	pushedAt time.Time // the upstream changed no later than this
	old      string    // the digest served when the hint came: the refs the change replaced
	behind   string    // a digest of the owner's found behind by an earlier hint (a claim too)
	ownerWas string    // the owner's last report when the hint came (a claim too: its copy did not move)
	owner    uint32    // the owner that should see the change
	due      time.Time // ask the upstream then, unless settled before (zero: not again)
	// claimedAt is when the owner was known to claim "unchanged" after
	// pushedAt (hint.claim; zero: it was not), and claimed the digest it
	// reported then.
	claimedAt time.Time
	claimed   string
	// upstream is the digest of the upstream's refs that the full node
	// fetched (fetched): an owner that reports it is right, not stale.
	upstream string
	// fetched: the full node saw the upstream differ from old at or after
	// pushedAt and fetched it itself; the hint now only waits for the
	// owner's claim, until expires.
	fetched bool
	counted bool // a stale report was counted for this hint
	// verifyOnly: an on-demand check's hint, which bounds no push: it
	// makes the owner's "unchanged" checked, but a claim before the full
	// node saw the upstream differ is not counted (the push may have come
	// after the owner's check).
	verifyOnly bool
	expires    time.Time
}

// maxClockSkew is how far ahead of the full node's clock an owner's clock
// may run: a report of a check stamped within it after a push is not held
// against the owner (it may have been made before the push).
const maxClockSkew = time.Minute

// Action is what the full node must do after an event of the book.
type Action uint8

const (
	None        Action = iota
	Verified           // a feed says nothing changed since verified_at: advance it to now
	CheckNow           // ask the upstream now
	CountStale         // count a stale report against the hint's owner (once a hint: it is marked counted)
	RefusedFull        // the book is full: the hint was dropped (the spot checks remain)
)

// hintWatch is how long a fetched hint waits for the owner's claim.
const hintWatch = 24 * time.Hour

// hintBook holds the hints not yet settled, by key. The zero value is ready (no
// wait, at most DefaultMaxHints).
type hintBook struct {
	wait  time.Duration // how long an owner has to report the change (--hint-wait)
	max   int           // 0: DefaultMaxHints
	hints map[repokey.Key]*hint
	// next is no later than the earliest due hint (zero: none): set by
	// due, and made earlier as hints fall due sooner.
	next time.Time
}

func newHintBook(wait time.Duration, max int) hintBook {
	return hintBook{wait: wait, max: max}
}

// add opens h for key, unless the book is full.
func (b *hintBook) add(key repokey.Key, h *hint) bool {
	if b.hints == nil {
		b.hints = map[repokey.Key]*hint{}
	}
	if len(b.hints) >= cmp.Or(b.max, DefaultMaxHints) {
		return false
	}
	b.hints[key] = h
	b.wake(h.due)
	return true
}

// setDue makes h due at t (not zero).
func (b *hintBook) setDue(h *hint, t time.Time) {
	h.due = t
	b.wake(t)
}

// wake notes that a hint is due at t (zero: none), for next.
func (b *hintBook) wake(t time.Time) {
	if !t.IsZero() && (b.next.IsZero() || t.Before(b.next)) {
		b.next = t
	}
}

// hear records that key's upstream changed no later than pushedAt, heard
// at now. verifiedAt is key's verified_at, served the digest the full node
// serves and owner its owner. A push before verifiedAt's second is a feed
// saying nothing changed since: verified_at can advance to now.
func (b *hintBook) hear(key repokey.Key, pushedAt, now, verifiedAt time.Time, served string, owner uint32) Action {
	// verified_at is kept to the second, and forges give push times in
	// whole seconds: a push in verified_at's own second may be after it.
	if !verifiedAt.IsZero() && pushedAt.Before(verifiedAt) {
		if h := b.hints[key]; h == nil || h.pushedAt.Before(verifiedAt) {
			return Verified
		}
		return None // an older hint is still open: it decides
	}
	if h := b.hints[key]; h != nil {
		// Hints of one change (a webhook, then the feed) are one: the
		// earliest push, the digest it replaced, counted at most once.
		if h.fetched && pushedAt.After(h.pushedAt) && served != h.old {
			// A new change after the one the full node fetched itself;
			// the owner's copy found behind then is still a claim.
			*h = hint{pushedAt: pushedAt, old: served, behind: h.old, owner: owner}
			b.setDue(h, now.Add(b.wait))
			return None
		}
		if h.verifyOnly && !h.fetched {
			// A push bound after an on-demand check's hint: the push's
			// time decides from now on.
			h.verifyOnly, h.pushedAt, h.claimedAt = false, pushedAt, time.Time{}
		}
		if !h.fetched && h.due.IsZero() {
			b.setDue(h, now.Add(b.wait))
		}
		return None
	}
	if !b.add(key, &hint{pushedAt: pushedAt, old: served, owner: owner, due: now.Add(b.wait)}) {
		return RefusedFull
	}
	return None
}

// verifyOnDemand opens a hint for an on-demand check of key at now, when
// none is open: the owner's answer "unchanged" is then checked against the
// upstream (claims, checked), without counting a claim made before the
// full node saw the upstream differ.
func (b *hintBook) verifyOnDemand(key repokey.Key, now time.Time, served string, owner uint32) Action {
	if _, ok := b.hints[key]; ok {
		return None
	}
	if !b.add(key, &hint{pushedAt: now, old: served, owner: owner, due: now.Add(b.wait), verifyOnly: true}) {
		return RefusedFull
	}
	return None
}

// reported follows an owner's report of a check of key at checkedAt (the
// owner's clock) with digest. An owner that says "unchanged" (hint.claim)
// after the push is asked about: the upstream is checked at once. The claim
// is held against it only when its check is later than the push by more
// than the clock skew allowed (an owner's clock may run ahead of the full
// node's; a task's answer, which is causally after, is taskClaim): then,
// when the full node already found the upstream ahead, the owner is counted
// (once a hint). An owner that reports something else saw a change: its
// pull settles the hint (verified), or the due check does.
func (b *hintBook) reported(key repokey.Key, owner uint32, checkedAt time.Time, digest string, now time.Time) Action {
	h := b.hints[key]
	if h == nil || !checkedAt.After(h.pushedAt) {
		return None
	}
	if owner != h.owner {
		h.owner, h.claimedAt = owner, time.Time{} // a new owner: its own reports decide
	}
	if !h.claim(digest) {
		if h.fetched {
			delete(b.hints, key) // the owner caught up
		}
		return None
	}
	if checkedAt.After(h.pushedAt.Add(maxClockSkew)) {
		return b.claimed(h, digest, now)
	}
	if h.fetched {
		return None
	}
	b.setDue(h, now)
	return CheckNow
}

// taskClaim follows an on-demand check's answer digest for key, from a
// check asked for at asked: causally after the hint when asked is not
// before its push, whatever the owner's clock says.
func (b *hintBook) taskClaim(key repokey.Key, asked time.Time, digest string, now time.Time) Action {
	h := b.hints[key]
	if h == nil || asked.Before(h.pushedAt) || !h.claim(digest) {
		return None
	}
	return b.claimed(h, digest, now)
}

// claimed records h's owner claiming "unchanged" (digest) at now: counted
// at once when the full node already found the upstream ahead of it, else
// checked now.
func (b *hintBook) claimed(h *hint, digest string, now time.Time) Action {
	if h.claimedAt.IsZero() {
		h.claimedAt, h.claimed = now, digest
	}
	if h.fetched {
		if h.counted {
			return None
		}
		h.counted = true
		return CountStale
	}
	b.setDue(h, now)
	return CheckNow
}

// checked follows the full node's own check of key's upstream, asked at
// at: differed when the upstream's refs were not those served, and the full
// node fetched them (ensure opened a hint if none was), upstream their
// digest. The owner is counted (once a hint) when it had claimed, after the
// push, a copy other than the upstream's; otherwise a differing upstream
// keeps the hint until the owner's next report, and an equal one settles
// it.
func (b *hintBook) checked(key repokey.Key, at time.Time, differed bool, upstream string) (Action, uint32) {
	h := b.hints[key]
	if h == nil {
		return None, 0
	}
	if !differed {
		if !h.fetched && !at.Before(h.pushedAt) {
			delete(b.hints, key) // the hint's change (if any) is served
		}
		return None, 0
	}
	h.fetched, h.due, h.expires, h.upstream = true, time.Time{}, at.Add(hintWatch), upstream
	if h.verifyOnly {
		// From now on the upstream is known to differ from old: an owner
		// that reports old after this check is stale.
		h.verifyOnly, h.pushedAt, h.claimedAt = false, at, time.Time{}
		return None, 0
	}
	if !h.claimedAt.IsZero() && !h.counted && h.claimed != upstream {
		h.counted = true
		return CountStale, h.owner
	}
	return None, 0
}

// ensure opens a hint of a change no later than at, replacing old, when
// key has none: the full node's own check found the upstream ahead
// without a hint (a spot check), and the owner's next report is weighed
// against it.
func (b *hintBook) ensure(key repokey.Key, at time.Time, old string, owner uint32) {
	if _, ok := b.hints[key]; !ok {
		b.add(key, &hint{pushedAt: at, old: old, owner: owner})
	}
}

// retry makes key's hint due at at (a check that failed).
func (b *hintBook) retry(key repokey.Key, at time.Time) {
	if h := b.hints[key]; h != nil && !h.fetched {
		b.setDue(h, at)
	}
}

// verified follows a verified_at that advanced to at by a pull from the
// owner: the owner served the upstream's refs, so a hint of a change
// before at is settled.
func (b *hintBook) verified(key repokey.Key, at time.Time) {
	if h := b.hints[key]; h != nil && !at.Before(h.pushedAt) {
		delete(b.hints, key)
	}
}

// forget drops key's hint (the repository left the mirror).
func (b *hintBook) forget(key repokey.Key) { delete(b.hints, key) }

// pending tells whether key has a change heard of that the full node has
// not served yet (an on-demand check's hint tells of none).
func (b *hintBook) pending(key repokey.Key) bool {
	h := b.hints[key]
	return h != nil && !h.fetched && !h.verifyOnly
}

// claims tells whether an owner's answer digest for key says that a
// change heard of, not yet served, is not there (hint.claim).
func (b *hintBook) claims(key repokey.Key, digest string) bool {
	h := b.hints[key]
	return h != nil && !h.fetched && h.claim(digest)
}

// claim tells whether digest, reported by the owner after the push, says
// "unchanged": it is the copy served when the hint came, one found behind
// before, or the owner's own last report then.
func (h *hint) claim(digest string) bool {
	if h.upstream != "" && digest == h.upstream {
		return false // what the upstream had: the owner caught up, or was ahead of the full node
	}
	return digest == h.old || h.behind != "" && digest == h.behind || h.ownerWas != "" && digest == h.ownerWas
}

// ownerHad records digest, the owner's last report, on key's open hint
// (when it has none yet): an owner whose copy does not move claims
// "unchanged", even when the full node serves another copy.
func (b *hintBook) ownerHad(key repokey.Key, digest string) {
	if h := b.hints[key]; h != nil && !h.fetched && h.ownerWas == "" {
		h.ownerWas = digest
	}
}

// stale is the digest key's owner reports and the full node found behind
// the upstream ("" if none).
func (b *hintBook) stale(key repokey.Key) string {
	switch h := b.hints[key]; {
	case h == nil:
		return ""
	case h.fetched:
		return h.old
	default:
		return h.behind
	}
}

// due returns the keys whose upstream must be asked at now, drops the
// expired hints, and returns the time of the next due one (zero: none).
func (b *hintBook) due(now time.Time) ([]repokey.Key, time.Time) {
	var keys []repokey.Key
	var next time.Time
	for k, h := range b.hints {
		switch {
		case h.fetched:
			if !now.Before(h.expires) {
				delete(b.hints, k)
			}
		case h.due.IsZero(): // asked already; waits for an event
		case !now.Before(h.due):
			keys = append(keys, k)
			h.due = time.Time{} // asked once; a later event makes it due again
		case next.IsZero() || h.due.Before(next):
			next = h.due
		}
	}
	b.next = next
	return keys, next
}

// Hear records that key's upstream changed no later than pushedAt, heard
// at now (a webhook, a forge feed, or a pull whose upstream was ahead):
// verifiedAt is key's verified_at, served the digest the full node serves
// and owner its owner. Verified: a feed says nothing changed since
// verified_at, which can advance to now.
func (p *Plan) Hear(key repokey.Key, pushedAt, now, verifiedAt time.Time, served string, owner uint32) Action {
	return p.hints.hear(key, pushedAt, now, verifiedAt, served, owner)
}

// VerifyOnDemand opens a hint for an on-demand check of key at now, when
// none is open: the owner's answer "unchanged" is then checked against
// the upstream.
func (p *Plan) VerifyOnDemand(key repokey.Key, now time.Time, served string, owner uint32) Action {
	return p.hints.verifyOnDemand(key, now, served, owner)
}

// OwnerHad records digest, the owner's last report, on key's open hint:
// an owner whose copy does not move claims "unchanged".
func (p *Plan) OwnerHad(key repokey.Key, digest string) { p.hints.ownerHad(key, digest) }

// TaskClaim weighs an on-demand check's answer digest for key, asked for
// at asked: a claim of "unchanged" to check now (CheckNow), or a stale
// report (CountStale: queued for the next Tick).
func (p *Plan) TaskClaim(key repokey.Key, asked time.Time, digest string, now time.Time) Action {
	act := p.hints.taskClaim(key, asked, digest, now)
	if act == CountStale {
		p.stale = append(p.stale, StaleReport{key, p.hints.hints[key].owner})
	}
	return act
}

// Checked follows the full node's own check of key's upstream, asked at
// at (hintBook.checked): CountStale names the owner to count at once.
func (p *Plan) Checked(key repokey.Key, at time.Time, differed bool, upstream string) (Action, uint32) {
	return p.hints.checked(key, at, differed, upstream)
}

// Ensure opens a hint of a change no later than at, replacing old, when
// key has none: a spot check found the upstream ahead.
func (p *Plan) Ensure(key repokey.Key, at time.Time, old string, owner uint32) {
	p.hints.ensure(key, at, old, owner)
}

// RetryCheck makes key's hint due again at at (a check that failed, or
// found no slot).
func (p *Plan) RetryCheck(key repokey.Key, at time.Time) { p.hints.retry(key, at) }

// HintWait is how long an owner has to report a change heard of.
func (p *Plan) HintWait() time.Duration { return p.hints.wait }

// Verified follows key's verified_at advanced to at by a pull from its
// owner: a hint of a change before at is settled.
func (p *Plan) Verified(key repokey.Key, at time.Time) { p.hints.verified(key, at) }

// ForgetHint drops key's hint (a repository that is not held, or owned
// here: nothing the upstream could contradict).
func (p *Plan) ForgetHint(key repokey.Key) { p.hints.forget(key) }

// HintPending tells whether key has a change heard of that the full node
// has not served yet.
func (p *Plan) HintPending(key repokey.Key) bool { return p.hints.pending(key) }

// Stale is the digest of key's owner that the full node found behind the
// upstream ("" if none).
func (p *Plan) Stale(key repokey.Key) string { return p.hints.stale(key) }
