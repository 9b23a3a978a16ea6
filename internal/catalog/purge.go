package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// ErrPurge is wrapped by CheckPurge's error.
var ErrPurge = errors.New("catalog change held: it would remove too many repositories")

// CheckPurge returns an error wrapping ErrPurge when removing removed of
// total repositories is more than maxShare of them (removed/total >
// maxShare). The caller then holds the removals and says so until an
// operator confirms. An empty catalog has nothing to protect.
func CheckPurge(total, removed int, maxShare float64) error {
	// The epsilon keeps "exactly the share" on the allowed side despite
	// float rounding (0.29*100 is 28.999999999999996).
	if total <= 0 || removed <= 0 || float64(removed) <= maxShare*float64(total)+1e-9 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d (%.1f%%), more than the %.1f%% allowed; the removals are held until an operator confirms",
		ErrPurge, removed, total, 100*float64(removed)/float64(total), 100*maxShare)
}

// HeldShown is how many held keys a one-line summary names.
const HeldShown = 5

// HeldSummary names in one line what purge protection holds: removed of
// total repositories at catalog commit, the first HeldShown of keys (the
// first held keys, in order; it may hold fewer than removed), and how many
// more there are. The coordinator and the full node's API say it alike.
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
