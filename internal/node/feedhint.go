package node

import (
	"context"
	"time"
)

// hintFromFeed is where a forge feed's push time reaches the full node.
// Until the full node vouches for freshness itself, the owner's check
// that the coordinator asked for with it is what acts on it.
func (n *Node) hintFromFeed(_ context.Context, key string, pushedAt time.Time) {
	n.log.Debug("forge feed: push seen", "key", key, "pushed_at", pushedAt)
}
