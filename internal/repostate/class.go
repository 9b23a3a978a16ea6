package repostate

import (
	"fmt"
	"strings"
)

// Class is why a repository's last check or pull failed, coarse enough
// for anyone to see: the error text, which the operator alone reads, tells
// open ports from closed ones and shows volunteers' file paths. The node
// that failed says it (from git's failure, package gitcmd, its limits, or
// the full node's verification of a pull), the coordinator stores and
// relays it (RepoState.class), and the API and console show its text. The
// zero value is NoClass: nothing failed.
//
// Its number is on the wire (the coordinator's messages) and its text in
// the API, the console and the coordinator's store: neither ever changes,
// and a class is added at the end.
type Class uint8

const (
	NoClass Class = iota
	// ClassOther: a failure none of the other classes names; also what a
	// failure shows that a previous version stored without its class, and
	// a class this version does not know (a newer node's).
	ClassOther
	ClassUnreachable // the network or TLS to the upstream failed
	ClassNotFound
	ClassTimeout
	ClassTooLarge    // over --max-repo-size or --git-memory-limit
	ClassTooManyRefs // over --max-refs
	ClassBadObjects  // refused by fsck on the way in, or broken on disk
	ClassEmpty       // the upstream advertises no branches or tags
	ClassBlocked     // the egress policy refused the destination
	ClassAuth
	ClassThrottled
	ClassInvalid  // the URL is not one gitfleet mirrors
	ClassInternal // the node's own failure (its disk, the pull from the owner)
	ClassDiskFull // the full node is above its disk high water
	ClassCancelled
	ClassLegal // HTTP 451
	// A volunteer's pull refused: it served tips the upstream never had
	// (counted against it), or refs the upstream does not show (a source
	// that was behind; not counted).
	ClassForged
	ClassMismatch
	numClasses
)

// classTexts are the classes' texts, as the API shows them.
var classTexts = [numClasses]string{
	NoClass:          "",
	ClassOther:       "failed",
	ClassUnreachable: "upstream unreachable",
	ClassNotFound:    "not found",
	ClassTimeout:     "timeout",
	ClassTooLarge:    "too large",
	ClassTooManyRefs: "too many refs",
	ClassBadObjects:  "bad objects",
	ClassEmpty:       "empty advertisement",
	ClassBlocked:     "blocked destination",
	ClassAuth:        "upstream refused access",
	ClassThrottled:   "upstream throttled",
	ClassInvalid:     "invalid URL",
	ClassInternal:    "mirror error",
	ClassDiskFull:    "disk full",
	ClassCancelled:   "cancelled",
	ClassLegal:       "unavailable for legal reasons",
	ClassForged:      "forged refs",
	ClassMismatch:    "refs differ from the upstream",
}

// Classes returns every class but NoClass, in the order of their numbers.
func Classes() []Class {
	out := make([]Class, 0, numClasses-1)
	for c := ClassOther; c < numClasses; c++ {
		out = append(out, c)
	}
	return out
}

// ClassFromWire reads a class's number from the wire: 0 is NoClass, and a
// number this version does not know (a newer version's class) is
// ClassOther.
func ClassFromWire(n uint32) Class {
	if n >= uint32(numClasses) {
		return ClassOther
	}
	return Class(n)
}

// OrOther is c, or ClassOther for NoClass: the class of a failure whose
// class nobody said (a state or a log entry a previous version wrote).
func (c Class) OrOther() Class {
	if c == NoClass {
		return ClassOther
	}
	return c
}

// String returns the class's public text ("" for NoClass). A value out of
// range reads as ClassOther's.
func (c Class) String() string {
	if c < numClasses {
		return classTexts[c]
	}
	return classTexts[ClassOther]
}

// ParseClass returns the class whose text is text ("" is NoClass). For
// any other text it returns ClassOther and an error.
func ParseClass(text string) (Class, error) {
	for c, t := range classTexts {
		if t == text {
			return Class(c), nil
		}
	}
	return ClassOther, fmt.Errorf("error class %q: want one of %q", text, strings.Join(classTexts[1:], `", "`))
}

// MarshalText gives the class's text, so that JSON shows it as a string.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a class's text.
func (c *Class) UnmarshalText(b []byte) error {
	cl, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = cl
	return nil
}
