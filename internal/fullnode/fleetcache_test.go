package fullnode

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/metrics/metricstest"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
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

// countingCoordinator answers the fleet's listings, counting the calls.
type countingCoordinator struct {
	fleetv1.UnimplementedCoordinatorServer
	nodes, catalog atomic.Int32
}

func (c *countingCoordinator) ListNodes(context.Context, *fleetv1.ListNodesRequest) (*fleetv1.ListNodesResponse, error) {
	c.nodes.Add(1)
	return &fleetv1.ListNodesResponse{Nodes: []*fleetv1.NodeInfo{{Id: 1, State: "active"}, {Id: 2, State: "active"}}}, nil
}

func (c *countingCoordinator) CatalogStatus(context.Context, *fleetv1.CatalogStatusRequest) (*fleetv1.CatalogStatusResponse, error) {
	c.catalog.Add(1)
	return &fleetv1.CatalogStatusResponse{Repos: 7}, nil
}

// However many scrapes of /metrics come, the full node asks its
// coordinator (a real gRPC server on 127.0.0.1) for the fleet's nodes and
// catalog at most once per fleetCacheTTL.
func TestScrapesAskTheCoordinatorAtMostOncePerCachePeriod(t *testing.T) {
	coord := &countingCoordinator{}
	srv := grpc.NewServer()
	fleetv1.RegisterCoordinatorServer(srv, coord)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	f := benchFullNode(t, 10)
	f.n.TestHooks().Connect(fleetv1.NewCoordinatorClient(conn), 1, "secret")
	reg, clk := f.cfg.Metrics, f.clk.(*clock.Fake)
	scrape := func() {
		t.Helper()
		if v, ok := metricstest.Value(t, reg, "gitfleet_nodes", "state", "active"); !ok || v != 2 {
			t.Fatalf("gitfleet_nodes{state=active} = %v (present %v), want 2", v, ok)
		}
		if v, ok := metricstest.Value(t, reg, "gitfleet_catalog_repos"); !ok || v != 7 {
			t.Fatalf("gitfleet_catalog_repos = %v (present %v), want 7", v, ok)
		}
	}
	for period := 1; period <= 3; period++ {
		for range 10 {
			scrape()
			clk.Advance(fleetCacheTTL / 20)
		}
		if n, c := coord.nodes.Load(), coord.catalog.Load(); int(n) != period || int(c) != period {
			t.Fatalf("after %d cache periods of scrapes: %d calls of ListNodes and %d of CatalogStatus, want %d of each", period, n, c, period)
		}
		clk.Advance(fleetCacheTTL / 2) // the period is over
	}
}
