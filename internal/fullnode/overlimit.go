package fullnode

import (
	"context"
	"fmt"

	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// pullTooLarge answers a pull from owner that --max-repo-size stopped
// (mirror.ErrPullTooLarge: the owner served more than the full node may
// hold; what came was dropped and the old refs are still served): the
// repository is fetched from its upstream instead, under the same limit.
//
// It is not counted against the owner as a mismatch: nothing it served
// was compared with the upstream, and an honest owner trips the limit too
// when its own --max-repo-size is larger than the full node's (each
// operator sets their own), or when its pack is less compact than the
// upstream's. What a hostile owner can cost is bounded: at most the limit
// in transfer per change it reports, nothing kept on disk, and no retry
// loop (a pull over a limit waits for the owner's next change: package
// pullplan's Plan.Ended).
func (f *Node) pullTooLarge(ctx context.Context, key repokey.Key, st *fleetv1.RepoState, owner uint32, cause error) (mirror.Result, error) {
	f.log.Warn("the pull from the owner went over --max-repo-size: dropped; fetching from the upstream instead",
		"key", key, "node", owner, "max_repo_size", f.cfg.Limits.MaxRepoSize, "err", cause)
	// Whatever the upstream answers, this digest of the owner's is not
	// pulled again (pullplan.Plan.NoteOverLimit): a failing upstream must
	// not turn an oversized owner into a transfer every 30 s.
	f.mu.Lock()
	f.plan.NoteOverLimit(key, st.GetDigest())
	f.mu.Unlock()
	res, err := f.syncUpstream(ctx, key, st)
	if err != nil {
		return res, fmt.Errorf("after the pull from owner node %d went over --max-repo-size, fetch from the upstream: %w", owner, err)
	}
	f.log.Info("fetched from the upstream after an oversized pull", "key", key, "node", owner)
	return res, nil
}
