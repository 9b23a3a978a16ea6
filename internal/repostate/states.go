package repostate

// The states of a mirrored repository, as the API names them: the
// coordinator's verdict on its checks, and the full node's own on its copy.
// Every role names them from here, and Names lists them all.
const (
	Pending = "pending" // not mirrored yet
	OK      = "ok"
	Failing = "failing"
	// Gone: the upstream answered "not found" again and again, or 451
	// (unavailable for legal reasons) once.
	Gone = "gone"
	// TooLarge and TooManyRefs: over an operator's limit (--max-repo-size,
	// --git-memory-limit; --max-refs), checked again after --max-interval
	// or on demand.
	TooLarge    = "too-large"
	TooManyRefs = "too-many-refs"
	// Unplaceable: every node refuses its URL (their egress policies).
	Unplaceable = "unplaceable"
	// Corrupt and Repairing: the full node's copy failed verification and
	// is not served until it is copied again; Unchecked: it was written
	// shortly before an unclean stop and is not served until verified.
	Corrupt   = "corrupt"
	Repairing = "repairing"
	Unchecked = "unchecked"
)

// Names lists every state, in the order people read them.
func Names() []string {
	return []string{OK, Pending, Failing, Gone, TooLarge, TooManyRefs, Unplaceable, Corrupt, Repairing, Unchecked}
}

// Valid tells whether name is a state's name.
func Valid(name string) bool {
	for _, n := range Names() {
		if n == name {
			return true
		}
	}
	return false
}
