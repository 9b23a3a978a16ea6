package fullnode

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
)

// The cached answer is shared by public requests: each gets its own
// slice, so that one sorting it (the console's nodes page) races no other.
func TestFleetCacheAnswersAreCopies(t *testing.T) {
	c := &fleetCache{nodes: []api.Node{{ID: 3}, {ID: 1}, {ID: 2}}}
	c.f = &Node{clk: clock.NewFake(time.Unix(1e9, 0))}
	c.nodesAt = c.f.clk.Now() // fresh: no call to the coordinator
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, err := c.Nodes(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			slices.SortFunc(ns, func(a, b api.Node) int { return int(b.ID) - int(a.ID) })
		}()
	}
	wg.Wait()
	if got := []uint32{c.nodes[0].ID, c.nodes[1].ID, c.nodes[2].ID}; !slices.Equal(got, []uint32{3, 1, 2}) {
		t.Fatalf("the cached answer was changed by a caller: %v", got)
	}
}
