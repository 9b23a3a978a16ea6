// Package repostate holds what the roles must agree on about the state of
// a mirrored repository: the states themselves (State, the one list that
// the coordinator, the nodes, the full node's view, the API, ctl, the
// console and the alerts use), and when "not found" answers make a
// repository gone, so that a node's scheduler and the coordinator's status
// reach the same verdict from the same answers of an upstream; why its
// last check failed, as anyone may see it (Class, the one vocabulary of
// failures from the node that failed to the API); and the words for a
// repository the fleet does not hold (NotMirrored).
//
// It holds constants and their names only: no state, no I/O, nothing of
// gitfleet imported, so that every role, pure cores included, may import
// it. To add a state, add it to the constants and to names; its name is on
// the wire (the API's JSON, the coordinator's messages and store), so a
// name never changes; so with a class's number and text.
package repostate

import (
	"time"

	"fmt"
	"strings"
)

// NotMirrored is what every role says of a repository key that the fleet
// does not hold (the API's and the console's 404, the coordinator's
// NotFound).
func NotMirrored(key string) string { return "repository " + key + " is not mirrored" }

// GoneAfter is how many "not found" answers in a row from its upstream make
// a repository gone: its node parks it and checks it again once a day
// (package schedule), and the coordinator reports it gone.
const GoneAfter = 5

// ReplicaBehindAfter is how long a replica on the full tier may report
// another refs digest than the recorded one (or none since it changed)
// before it counts as behind: longer than a pull of the change takes.
const ReplicaBehindAfter = 10 * time.Minute

// State is a repository's state as the API shows it: the coordinator's
// verdict on its upstream (Pending to Unplaceable), or the full node's
// word on its mirror while the mirror is broken and not served (Corrupt,
// Repairing, Unchecked). The zero value is Pending.
type State uint8

const (
	// Pending: not mirrored yet.
	Pending State = iota
	OK
	Failing
	// Gone: the upstream answered "not found" GoneAfter times in a row
	// in other words than an HTTP status (an SSH server's, a path that is
	// no repository).
	Gone
	// TooLarge and TooManyRefs: over an operator's limit (--max-repo-size,
	// --git-memory-limit; --max-refs), checked again after --max-interval
	// or on demand.
	TooLarge
	TooManyRefs
	// Unplaceable: every placement member refused it (their egress
	// policies); nobody mirrors it until a node that takes it joins.
	Unplaceable
	// Corrupt: the integrity scan found the mirror broken.
	Corrupt
	// Repairing: the broken mirror is being copied again from upstream.
	Repairing
	// Unchecked: written shortly before an unclean stop, and not checked
	// since.
	Unchecked
	// The upstream is gone, each for its reason, shown with the time it
	// was first seen (RepoState.state_since_ms). The mirror keeps serving
	// its last verified state for --retention, unless the reason is legal.
	//
	// Deleted: HTTP 404 or 410 GoneAfter times in a row.
	Deleted
	// Legal: HTTP 451 (unavailable for legal reasons), once: not served.
	Legal
	// Disabled: the forge's API says the forge disabled it (a policy or
	// billing block).
	Disabled
	// Archived: the forge's API says its owner archived it (read-only):
	// its git answers are fine, and it is checked once per
	// --archived-interval.
	Archived
	// Renamed: the upstream answers under another name (a rename or a
	// transfer), RepoState.renamed_to, since RepoState.state_since_ms: a
	// forge's feed or API named it so, or its git server redirected to
	// it. The mirror keeps serving what it holds.
	Renamed
)

// names are the states' names on the wire.
var names = [...]string{
	Pending:     "pending",
	OK:          "ok",
	Failing:     "failing",
	Gone:        "gone",
	TooLarge:    "too-large",
	TooManyRefs: "too-many-refs",
	Unplaceable: "unplaceable",
	Corrupt:     "corrupt",
	Repairing:   "repairing",
	Unchecked:   "unchecked",
	Deleted:     "deleted",
	Legal:       "legal",
	Disabled:    "disabled",
	Archived:    "archived",
	Renamed:     "renamed",
}

// All returns every state, in the order people read them (the console's
// filter, the API's errors and its description).
func All() []State {
	return []State{OK, Pending, Failing, Gone, Deleted, Legal, Disabled, Archived, Renamed, TooLarge, TooManyRefs, Unplaceable, Corrupt, Repairing, Unchecked}
}

// Departed tells whether s says the upstream is gone (Gone, Deleted,
// Legal, Disabled): what the mirror holds is its last verified state.
func (s State) Departed() bool {
	switch s {
	case Gone, Deleted, Legal, Disabled:
		return true
	}
	return false
}

// Names returns the names of All, in its order.
func Names() []string {
	all := All()
	out := make([]string, len(all))
	for i, s := range all {
		out[i] = s.String()
	}
	return out
}

// String returns the state's name on the wire. A value out of range (none
// is ever made) reads as pending, the state that claims nothing.
func (s State) String() string {
	if int(s) < len(names) {
		return names[s]
	}
	return names[Pending]
}

// Parse returns the state named name. For any other name it returns
// Pending and an error that lists the states there are, for a person who
// typed it.
func Parse(name string) (State, error) {
	for s, n := range names {
		if n == name {
			return State(s), nil
		}
	}
	return Pending, fmt.Errorf("state %q: want one of %s", name, strings.Join(Names(), ", "))
}

// MarshalText gives the state's name, so that JSON shows it as a string.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error {
	st, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = st
	return nil
}
