package fullnode

import (
	"cmp"
	"container/heap"
	"iter"
	"time"
)

// The full node vouches for freshness itself (issue 22): a repository's
// verified_at is when the full node last saw the upstream's refs equal to
// what it serves, and what the public is told (current, staleness) derives
// from it, never from an owner's report alone. This file is the pure part:
// the book of change hints, the rule for current, and the choice of spot
// checks. The I/O around them is in upstreamcheck.go.

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

// hintAction is what the full node must do after an event of the book.
type hintAction uint8

const (
	hintNone        hintAction = iota
	hintVerified               // a feed says nothing changed since verified_at: advance it to now
	hintCheckNow               // ask the upstream now
	hintCountStale             // count a stale report against the hint's owner (once a hint: it is marked counted)
	hintRefusedFull            // the book is full: the hint was dropped (the spot checks remain)
)

// hintWatch is how long a fetched hint waits for the owner's claim.
const hintWatch = 24 * time.Hour

// hintBook holds the hints not yet settled, by key. It is pure (times
// are passed in) and guarded by Node.mu. The zero value is ready (no
// wait, at most maxHints).
type hintBook struct {
	wait  time.Duration // how long an owner has to report the change (--hint-wait)
	max   int           // 0: maxHints
	hints map[string]*hint
}

func newHintBook(wait time.Duration, max int) hintBook {
	return hintBook{wait: wait, max: max}
}

// add opens h for key, unless the book is full.
func (b *hintBook) add(key string, h *hint) bool {
	if b.hints == nil {
		b.hints = map[string]*hint{}
	}
	if len(b.hints) >= cmp.Or(b.max, maxHints) {
		return false
	}
	b.hints[key] = h
	return true
}

// hear records that key's upstream changed no later than pushedAt, heard
// at now. verifiedAt is key's verified_at, served the digest the full node
// serves and owner its owner. A push before verifiedAt's second is a feed
// saying nothing changed since: verified_at can advance to now.
func (b *hintBook) hear(key string, pushedAt, now, verifiedAt time.Time, served string, owner uint32) hintAction {
	// verified_at is kept to the second, and forges give push times in
	// whole seconds: a push in verified_at's own second may be after it.
	if !verifiedAt.IsZero() && pushedAt.Before(verifiedAt) {
		if h := b.hints[key]; h == nil || h.pushedAt.Before(verifiedAt) {
			return hintVerified
		}
		return hintNone // an older hint is still open: it decides
	}
	if h := b.hints[key]; h != nil {
		// Hints of one change (a webhook, then the feed) are one: the
		// earliest push, the digest it replaced, counted at most once.
		if h.fetched && pushedAt.After(h.pushedAt) && served != h.old {
			// A new change after the one the full node fetched itself;
			// the owner's copy found behind then is still a claim.
			*h = hint{pushedAt: pushedAt, old: served, behind: h.old, owner: owner, due: now.Add(b.wait)}
			return hintNone
		}
		if h.verifyOnly && !h.fetched {
			// A push bound after an on-demand check's hint: the push's
			// time decides from now on.
			h.verifyOnly, h.pushedAt, h.claimedAt = false, pushedAt, time.Time{}
		}
		if !h.fetched && h.due.IsZero() {
			h.due = now.Add(b.wait)
		}
		return hintNone
	}
	if !b.add(key, &hint{pushedAt: pushedAt, old: served, owner: owner, due: now.Add(b.wait)}) {
		return hintRefusedFull
	}
	return hintNone
}

// verifyOnDemand opens a hint for an on-demand check of key at now, when
// none is open: the owner's answer "unchanged" is then checked against the
// upstream (claims, checked), without counting a claim made before the
// full node saw the upstream differ.
func (b *hintBook) verifyOnDemand(key string, now time.Time, served string, owner uint32) hintAction {
	if _, ok := b.hints[key]; ok {
		return hintNone
	}
	if !b.add(key, &hint{pushedAt: now, old: served, owner: owner, due: now.Add(b.wait), verifyOnly: true}) {
		return hintRefusedFull
	}
	return hintNone
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
func (b *hintBook) reported(key string, owner uint32, checkedAt time.Time, digest string, now time.Time) hintAction {
	h := b.hints[key]
	if h == nil || !checkedAt.After(h.pushedAt) {
		return hintNone
	}
	if owner != h.owner {
		h.owner, h.claimedAt = owner, time.Time{} // a new owner: its own reports decide
	}
	if !h.claim(digest) {
		if h.fetched {
			delete(b.hints, key) // the owner caught up
		}
		return hintNone
	}
	if checkedAt.After(h.pushedAt.Add(maxClockSkew)) {
		return b.claimed(h, digest, now)
	}
	if h.fetched {
		return hintNone
	}
	h.due = now
	return hintCheckNow
}

// taskClaim follows an on-demand check's answer digest for key, from a
// check asked for at asked: causally after the hint when asked is not
// before its push, whatever the owner's clock says.
func (b *hintBook) taskClaim(key string, asked time.Time, digest string, now time.Time) hintAction {
	h := b.hints[key]
	if h == nil || asked.Before(h.pushedAt) || !h.claim(digest) {
		return hintNone
	}
	return b.claimed(h, digest, now)
}

// claimed records h's owner claiming "unchanged" (digest) at now: counted
// at once when the full node already found the upstream ahead of it, else
// checked now.
func (b *hintBook) claimed(h *hint, digest string, now time.Time) hintAction {
	if h.claimedAt.IsZero() {
		h.claimedAt, h.claimed = now, digest
	}
	if h.fetched {
		if h.counted {
			return hintNone
		}
		h.counted = true
		return hintCountStale
	}
	h.due = now
	return hintCheckNow
}

// checked follows the full node's own check of key's upstream, asked at
// at: differed when the upstream's refs were not those served, and the full
// node fetched them (ensure opened a hint if none was), upstream their
// digest. The owner is counted (once a hint) when it had claimed, after the
// push, a copy other than the upstream's; otherwise a differing upstream
// keeps the hint until the owner's next report, and an equal one settles
// it.
func (b *hintBook) checked(key string, at time.Time, differed bool, upstream string) (hintAction, uint32) {
	h := b.hints[key]
	if h == nil {
		return hintNone, 0
	}
	if !differed {
		if !h.fetched && !at.Before(h.pushedAt) {
			delete(b.hints, key) // the hint's change (if any) is served
		}
		return hintNone, 0
	}
	h.fetched, h.due, h.expires, h.upstream = true, time.Time{}, at.Add(hintWatch), upstream
	if h.verifyOnly {
		// From now on the upstream is known to differ from old: an owner
		// that reports old after this check is stale.
		h.verifyOnly, h.pushedAt, h.claimedAt = false, at, time.Time{}
		return hintNone, 0
	}
	if !h.claimedAt.IsZero() && !h.counted && h.claimed != upstream {
		h.counted = true
		return hintCountStale, h.owner
	}
	return hintNone, 0
}

// ensure opens a hint of a change no later than at, replacing old, when
// key has none: the full node's own check found the upstream ahead
// without a hint (a spot check), and the owner's next report is weighed
// against it.
func (b *hintBook) ensure(key string, at time.Time, old string, owner uint32) {
	if _, ok := b.hints[key]; !ok {
		b.add(key, &hint{pushedAt: at, old: old, owner: owner})
	}
}

// retry makes key's hint due at at (a check that failed).
func (b *hintBook) retry(key string, at time.Time) {
	if h := b.hints[key]; h != nil && !h.fetched {
		h.due = at
	}
}

// verified follows a verified_at that advanced to at by a pull from the
// owner: the owner served the upstream's refs, so a hint of a change
// before at is settled.
func (b *hintBook) verified(key string, at time.Time) {
	if h := b.hints[key]; h != nil && !at.Before(h.pushedAt) {
		delete(b.hints, key)
	}
}

// forget drops key's hint (the repository left the mirror).
func (b *hintBook) forget(key string) { delete(b.hints, key) }

// pending tells whether key has a change heard of that the full node has
// not served yet (an on-demand check's hint tells of none).
func (b *hintBook) pending(key string) bool {
	h := b.hints[key]
	return h != nil && !h.fetched && !h.verifyOnly
}

// claims tells whether an owner's answer digest for key says that a
// change heard of, not yet served, is not there (hint.claim).
func (b *hintBook) claims(key, digest string) bool {
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
func (b *hintBook) ownerHad(key, digest string) {
	if h := b.hints[key]; h != nil && !h.fetched && h.ownerWas == "" {
		h.ownerWas = digest
	}
}

// stale is the digest key's owner reports and the full node found behind
// the upstream ("" if none).
func (b *hintBook) stale(key string) string {
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
func (b *hintBook) due(now time.Time) ([]string, time.Time) {
	var keys []string
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
	return keys, next
}

// freshness is what current depends on for one repository.
type freshness struct {
	served      bool      // held, on disk, not broken
	verifiedAt  time.Time // zero: never verified
	digest      string    // the digest the full node serves
	ownerDigest string    // the owner's last report
	ownerCheck  time.Time // its time
	hinted      bool      // a change heard of and not served yet (hintBook.pending)
	staleOwner  string    // a digest of the owner found behind the upstream (hintBook.stale)
	// emptying: the owner's last check found the upstream advertising no
	// refs, which waits for a later check to confirm it (mirror's empty
	// guard); the refs served may be gone upstream.
	emptying bool
}

// current tells whether the full node serves what the upstream had when
// last verified, with no newer change known: none heard of, no empty
// advertisement waiting for its confirmation (the repository's last_error
// says so meanwhile), and no owner check after verified_at that saw other
// refs (unless the full node found those refs behind the upstream).
func (s freshness) current() bool {
	if !s.served || s.verifiedAt.IsZero() || s.hinted || s.emptying {
		return false
	}
	// verified_at is kept to the second: an owner's check within that
	// second is taken as before it (a differing one queues a pull anyway).
	if s.ownerDigest == s.digest || s.ownerCheck.Before(s.verifiedAt.Add(time.Second)) {
		return true
	}
	return s.staleOwner != "" && s.ownerDigest == s.staleOwner
}

// oldestVerified returns up to n keys that pass keep, the oldest
// verified_at first (never verified: 0, first of all), from all (key and
// verified_at in unix seconds): a bounded heap, O(len(all) log n).
func oldestVerified(all iter.Seq2[string, uint32], n int, keep func(string) bool) []string {
	if n <= 0 {
		return nil
	}
	h := &spotHeap{}
	for k, v := range all {
		if h.Len() == n && v >= (*h)[0].at {
			continue
		}
		if !keep(k) {
			continue
		}
		if h.Len() == n {
			heap.Pop(h)
		}
		heap.Push(h, spotItem{k, v})
	}
	out := make([]string, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(spotItem).key
	}
	return out
}

type spotItem struct {
	key string
	at  uint32
}

// spotHeap is a max-heap on at (the newest of the oldest n on top); ties
// by key, so that a choice is deterministic.
type spotHeap []spotItem

func (h spotHeap) Len() int { return len(h) }
func (h spotHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at > h[j].at
	}
	return h[i].key > h[j].key
}
func (h spotHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *spotHeap) Push(x any)   { *h = append(*h, x.(spotItem)) }
func (h *spotHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// spotGap is the time between two spot checks at perHour an hour (0: none).
func spotGap(perHour int) time.Duration {
	if perHour <= 0 {
		return 0
	}
	return time.Hour / time.Duration(perHour)
}

// unixSeconds packs t for the view: 0 is never (and any time before 1970).
func unixSeconds(t time.Time) uint32 {
	if t.IsZero() || t.Unix() <= 0 {
		return 0
	}
	return uint32(min(t.Unix(), int64(^uint32(0))))
}

// fromUnixSeconds is unixSeconds' inverse (0: the zero time).
func fromUnixSeconds(s uint32) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(int64(s), 0)
}
