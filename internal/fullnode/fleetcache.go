package fullnode

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
)

// fleetCacheTTL is how long the public reads of the fleet (a scrape of
// /metrics, the console's pages) reuse the coordinator's last answer.
const fleetCacheTTL = 2 * time.Second

// fleetCache keeps the coordinator's last answers about the nodes and the
// catalog for fleetCacheTTL, so that public requests, however many, make
// at most one call of each to the coordinator per TTL. The API's own
// listings and the alerts ask the coordinator each time.
type fleetCache struct {
	f *Node

	mu       sync.Mutex
	nodesAt  time.Time
	nodes    []api.Node
	catAt    time.Time
	cat      api.CatalogStatus
	nodesErr error
	catErr   error
}

func (c *fleetCache) Nodes(ctx context.Context) ([]api.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.f.clk.Now()
	if c.nodesAt.IsZero() || now.Sub(c.nodesAt) >= fleetCacheTTL || now.Before(c.nodesAt) {
		c.nodes, c.nodesErr = c.f.backend.Nodes(ctx)
		c.nodesAt = now
	}
	// A copy: callers may sort it (the console does), and share nothing.
	return slices.Clone(c.nodes), c.nodesErr
}

func (c *fleetCache) Catalog(ctx context.Context) (api.CatalogStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.f.clk.Now()
	if c.catAt.IsZero() || now.Sub(c.catAt) >= fleetCacheTTL || now.Before(c.catAt) {
		c.cat, c.catErr = c.f.backend.Catalog(ctx)
		c.catAt = now
	}
	return c.cat, c.catErr
}
