package api

import (
	"fmt"
	"strings"
)

// HeldShown is how many held keys a one-line summary names.
const HeldShown = 5

// Summary names what purge protection holds in one line: the count, the
// first HeldShown keys, and how many more there are.
func (p *PendingPurge) Summary() string {
	return HeldSummary(p.Removed, p.Total, p.Commit, p.Keys)
}

// HeldSummary is PendingPurge.Summary from its parts (keys: the first held
// keys, in order; it may hold fewer than removed).
func HeldSummary(removed, total int, commit string, keys []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the removal of %d of %d repositories is held (catalog commit %.12s)", removed, total, commit)
	if len(keys) > 0 {
		shown := keys[:min(len(keys), HeldShown)]
		fmt.Fprintf(&b, ": %s", strings.Join(shown, ", "))
		if more := removed - len(shown); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}
	return b.String()
}
