package node

import (
	"fmt"
	"slices"

	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// withTasksOf returns r carrying the on-demand task IDs of older, a result
// of the same key that r replaces before it was sent: the newest result
// wins, but the tasks waiting for the older one must hear of it, or they
// stay running until they time out.
func withTasksOf(r, older *fleetv1.CheckResult) *fleetv1.CheckResult {
	if older == nil || older == r || len(older.GetTaskIds()) == 0 {
		return r
	}
	ids := slices.Concat(older.GetTaskIds(), r.GetTaskIds())
	slices.Sort(ids)
	r.TaskIds = slices.Compact(ids)
	return r
}

// refuseAssignment reports an assigned repository that this node will not
// fetch (its URL is not allowed here, or does not match its key): the
// coordinator places it on another node, or shows it unplaceable with the
// reason, instead of the repository going stale in silence.
func (n *Node) refuseAssignment(key, url, want string, err error) {
	if err == nil {
		err = fmt.Errorf("%w: the URL %q is the repository %q, not %q", repokey.ErrInvalid, url, want, key)
	}
	// The coordinator remembers a refusal and offers the key elsewhere:
	// this is said once per key and session, not in a loop.
	n.log.Warn("assignment refused: this node's policy does not accept the repository's URL; the coordinator places it elsewhere",
		"key", key, "url", url, "err", err)
	if repokey.Check(key) != nil {
		return // not a key the coordinator could record
	}
	n.Report(&fleetv1.CheckResult{Key: key, CheckedAtMs: n.clk.Now().UnixMilli(),
		Error: "refused by node: " + err.Error(), ErrorClass: "refused", Class: uint32(PublicClass(err))})
}

// MirrorSize is key's mirror's size on disk as the coordinator weighs the
// full tier by it (mirror.Store.Size), 0 if it cannot be read.
func (n *Node) MirrorSize(key repokey.Key) uint64 {
	size, err := n.mirror.Size(key)
	if err != nil {
		n.log.Warn("could not measure the mirror", "key", key, "err", err)
		return 0
	}
	return uint64(size)
}
