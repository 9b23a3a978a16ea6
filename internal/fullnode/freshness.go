package fullnode

import "time"

// The full node vouches for freshness itself (issue 22): a repository's
// verified_at is when the full node last saw the upstream's refs equal to
// what it serves, and what the public is told (current, staleness) derives
// from it, never from an owner's report alone. This file holds the rule
// for current; the book of change hints and the choice of spot checks are
// package pullplan's, and the I/O around them is in upstreamcheck.go.

// freshness is what current depends on for one repository.
type freshness struct {
	served      bool      // held, on disk, not broken
	verifiedAt  time.Time // zero: never verified
	digest      string    // the digest the full node serves
	ownerDigest string    // the owner's last report
	ownerCheck  time.Time // its time
	hinted      bool      // a change heard of and not served yet (pullplan.Plan.HintPending)
	staleOwner  string    // a digest of the owner found behind the upstream (pullplan.Plan.Stale)
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
