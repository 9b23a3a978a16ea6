package fullnode

import (
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitserve"
)

// openPackCache makes the full node's pack cache in <data>/tmp/packcache
// (emptied at start, as the rest of tmp), or nil when it is turned off.
func openPackCache(cfg Config, clk clock.Clock) (*gitserve.PackCache, error) {
	if cfg.ServeCache.MaxBytes <= 0 {
		return nil, nil
	}
	return gitserve.NewPackCache(filepath.Join(cfg.DataDir, "tmp", "packcache"), cfg.ServeCache, clk)
}
