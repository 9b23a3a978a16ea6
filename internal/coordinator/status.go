package coordinator

import (
	"encoding/hex"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/intern"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// repoStatus is what the coordinator knows of one repository beyond its
// catalog entry (see entry) and its placement (see owner). A coordinator
// keeps one for each repository that has been checked, up to a million, so
// it is small: 88 bytes, the digest in binary, HEAD's branch a shared
// copy, and its key in the status map is the placement engine's copy (see
// statusOf).
type repoStatus struct {
	lastCheck, lastChange int64 // unix ms
	since                 int64 // unix ms: when the state was first seen (its last change)
	lastError             string
	// head is the branch the owner's HEAD names (CheckResult.head), one
	// shared copy a name (heads).
	head            string
	checks, fetches uint32
	failures        uint16 // in a row
	// notFound counts "not found" answers in a row, up to 255: only
	// whether it reached repostate.GoneAfter matters.
	notFound     uint8
	class        repostate.Class // of lastError
	lastDuration packedMs        // how long the last check took
	state        repostate.State
	hasDigest    bool
	digest       [16]byte
}

// resultClass is the class of the failed check res: the node's, or for a
// node of a previous version, which sends git's word alone (error_class),
// that word's class.
func resultClass(res *fleetv1.CheckResult) repostate.Class {
	if c := repostate.ClassFromWire(res.GetClass()); c != repostate.NoClass {
		return c
	}
	switch res.GetErrorClass() {
	case "empty-advertisement":
		return repostate.ClassEmpty
	case "cancelled":
		return repostate.ClassCancelled
	}
	return gitcmd.Class(res.GetErrorClass()).Public()
}

// limitState is the state of a repository whose check failed on a limit,
// by the failure's class.
func limitState(c repostate.Class) (repostate.State, bool) {
	switch c {
	case repostate.ClassTooLarge:
		return repostate.TooLarge, true
	case repostate.ClassTooManyRefs:
		return repostate.TooManyRefs, true
	}
	return repostate.Pending, false
}

// parseState reads a stored state: one this version does not know is
// pending (its next check says what it is).
func parseState(name string) repostate.State {
	s, _ := repostate.Parse(name)
	return s
}

// maxErrorLen bounds the error text kept of a failed check: a node's
// report is not trusted to be short.
const maxErrorLen = 1024

// Digest returns the digest of the repository's refs as nodes report it
// (gitcmd.Refs.Digest), or "".
func (s *repoStatus) Digest() string {
	if !s.hasDigest {
		return ""
	}
	return hex.EncodeToString(s.digest[:])
}

// setDigest records d, a digest as nodes report it: 32 hex digits, or ""
// for a repository without refs. It reports false, and records nothing,
// for anything else.
func (s *repoStatus) setDigest(d string) bool {
	if d == "" {
		s.hasDigest, s.digest = false, [16]byte{}
		return true
	}
	b, ok := gitcmd.ParseDigest(d)
	if !ok {
		return false
	}
	s.hasDigest, s.digest = true, b
	return true
}

// setError records the error of a failed check of key, cut to
// maxErrorLen: with errs, as its shared template (the key's place marked;
// package intern), since a host that fails fails the same way for every
// repository it has. Read it with errorText.
func (s *repoStatus) setError(e string, errs *intern.Templates, key repokey.Key) {
	if len(e) > maxErrorLen {
		e = strings.ToValidUTF8(e[:maxErrorLen], "") + "..."
	}
	if errs != nil {
		e = errs.Pack(e, key.String())
	}
	s.lastError = e
}

// errorText is the error setError recorded for key.
func (s *repoStatus) errorText(key repokey.Key) string {
	return intern.Unpack(s.lastError, key.String())
}

// packedMs is a duration in 16 bits, to keep a status small: milliseconds
// up to 32.767 s, whole seconds above (the top bit set), up to 9 hours.
type packedMs uint16

const packedSeconds = 1 << 15

func packMs(ms int64) packedMs {
	switch {
	case ms <= 0:
		return 0
	case ms < packedSeconds:
		return packedMs(ms)
	}
	return packedMs(packedSeconds | min((ms+500)/1000, packedSeconds-1))
}

func (p packedMs) ms() int64 {
	if p&packedSeconds == 0 {
		return int64(p)
	}
	return int64(p&^packedSeconds) * 1000
}

// add8, add16 and add32 count up to the type's largest value and stay
// there.
func add8(n uint8) uint8    { return n + min(1, ^n) }
func add16(n uint16) uint16 { return n + min(1, ^n) }
func add32(n uint32) uint32 { return n + min(1, ^n) }

// statusRecord is a status as the store keeps it.
type statusRecord struct {
	Digest     string `json:",omitempty"`
	State      string `json:",omitempty"`
	LastCheck  int64  `json:",omitempty"` // unix ms
	LastChange int64  `json:",omitempty"`
	Since      int64  `json:",omitempty"` // unix ms: when the state was first seen
	LastError  string `json:",omitempty"`
	// Class is LastError's (repostate.Class's text). A record a previous
	// version wrote has none: its error shows as "failed" until the next
	// check.
	Class      string `json:",omitempty"`
	Failures   int    `json:",omitempty"`
	NotFound   int    `json:",omitempty"` // "not found" answers in a row
	Checks     uint64 `json:",omitempty"`
	Fetches    uint64 `json:",omitempty"`
	DurationMs int64  `json:",omitempty"` // of the last check
	// The root commits a full node last reported, and the fork network
	// the repository was in (its name is history: see package network),
	// and its parent if a forge's feed said it is a fork.
	Roots   []string `json:",omitempty"`
	Network string   `json:",omitempty"`
	Parent  string   `json:",omitempty"`
	// Size is the repository's size as the full tier weighs it, packed
	// (tiersize.go); 0: none reported.
	Size uint16 `json:",omitempty"`
	Head string `json:",omitempty"` // the branch HEAD names
}

func (s *repoStatus) record(key repokey.Key) statusRecord {
	return statusRecord{Digest: s.Digest(), State: s.state.String(), LastCheck: s.lastCheck, LastChange: s.lastChange, Since: s.since,
		LastError: s.errorText(key), Class: s.class.String(), Failures: int(s.failures), NotFound: int(s.notFound),
		Checks: uint64(s.checks), Fetches: uint64(s.fetches), DurationMs: s.lastDuration.ms(), Head: s.head}
}

// status turns a stored record back into a repoStatus; a field out of range
// is clamped, and a digest that is not one is dropped (the next check
// brings it back).
func (r statusRecord) status(errs *intern.Templates, key repokey.Key) repoStatus {
	s := repoStatus{state: parseState(r.State), lastCheck: r.LastCheck, lastChange: r.LastChange, since: r.Since,
		failures: uint16(min(max(r.Failures, 0), 1<<16-1)), notFound: uint8(min(max(r.NotFound, 0), 1<<8-1)),
		checks: uint32(min(r.Checks, 1<<32-1)), fetches: uint32(min(r.Fetches, 1<<32-1)), lastDuration: packMs(r.DurationMs),
		head: r.Head}
	s.setDigest(r.Digest)
	if r.LastError != "" {
		s.setError(r.LastError, errs, key)
		s.class, _ = repostate.ParseClass(r.Class) // a text this version does not know: ClassOther
		s.class = s.class.OrOther()
	}
	return s
}

// maxHeads bounds the branch names headName keeps one copy of: past it,
// a name is kept as the node sent it.
const maxHeads = 1 << 12

// headName is the branch name a node reported for HEAD, checked (a branch,
// no longer than a ref gitfleet keeps: a node's report is not trusted) and
// shared, as most repositories name one of a few branches; "" for none or
// a name refused. Called with c.mu held.
func (c *Coordinator) headName(h string) string {
	if !strings.HasPrefix(h, "refs/heads/") || len(h) > maxHeadLen || gitcmd.CheckRefName(h, gitcmd.RefLimits{}) != "" {
		return ""
	}
	if s, ok := c.heads[h]; ok {
		return s
	}
	if len(c.heads) < maxHeads {
		c.heads[h] = h
	}
	return h
}

// maxHeadLen is the longest HEAD branch name kept.
const maxHeadLen = 1024
