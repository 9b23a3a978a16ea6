package node

import (
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/gitserve"
)

// openPackCache makes the full node's pack cache in <data>/tmp/packcache
// (emptied at start, as the rest of tmp), or nil when it is turned off.
func openPackCache(n *Node) (*gitserve.PackCache, error) {
	if n.cfg.ServeCache.MaxBytes <= 0 {
		return nil, nil
	}
	return gitserve.NewPackCache(filepath.Join(n.cfg.DataDir, "tmp", "packcache"), n.cfg.ServeCache, n.clk)
}
