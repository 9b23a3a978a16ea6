package coordinator

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A node's standing: the full nodes count the faults of the nodes they
// pull from (package fullnode: the pulls that served forged tips, the
// stale reports) and may revoke them. They tell the coordinator their
// counts, and the coordinator tells each node the sum, so that its
// volunteer sees it (gitfleet node status).

// counts are one full node's counts of a node's faults.
type counts struct{ mismatches, staleReports uint64 }

// ReportStanding records what the calling full node counted against a
// node and tells the node, if it is in session.
func (c *Coordinator) ReportStanding(ctx context.Context, req *fleetv1.ReportStandingRequest) (*fleetv1.ReportStandingResponse, error) {
	by, err := c.authFull(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := req.GetNodeId()
	if c.nodes[id] == nil {
		return nil, status.Errorf(codes.NotFound, "node %d is not in the fleet", id)
	}
	if c.standing == nil {
		c.standing = map[uint32]map[uint32]counts{}
	}
	if c.standing[id] == nil {
		c.standing[id] = map[uint32]counts{}
	}
	c.standing[id][by] = counts{req.GetMismatches(), req.GetStaleReports()}
	if s := c.sessions[id]; s != nil {
		s.queueStanding(c.standingOf(id))
	}
	return &fleetv1.ReportStandingResponse{}, nil
}

// standingOf is node id's standing, summed over the full nodes that
// reported one (nil: none did). Caller holds c.mu.
func (c *Coordinator) standingOf(id uint32) *fleetv1.Standing {
	by := c.standing[id]
	if len(by) == 0 {
		return nil
	}
	st := &fleetv1.Standing{}
	for _, n := range by {
		st.Mismatches += n.mismatches
		st.StaleReports += n.staleReports
	}
	return st
}
