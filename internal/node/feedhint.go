package node

import (
	"context"
	"errors"
	"time"
)

// hintFromFeed is where a forge feed's push time, forwarded by the
// coordinator, reaches the full node, which then vouches for what it
// serves (ChangeHint).
func (n *Node) hintFromFeed(ctx context.Context, key string, pushedAt time.Time) {
	if err := n.ChangeHint(ctx, key, pushedAt); err != nil && !errors.Is(err, ErrNotMirrored) {
		n.log.Debug("forge feed: hint not taken", "key", key, "pushed_at", pushedAt, "err", err)
	}
}
