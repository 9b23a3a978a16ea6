package coordinator

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// cancelCheck routes the cancellation of an on-demand check (task) of a
// repository to the nodes it may have been sent to: its owner and the
// target of a move. The task's route is forgotten: the full node that
// asked has settled the task already. Caller holds c.mu.
func (c *Coordinator) cancelCheck(key repokey.Key, req *fleetv1.FetchNowRequest, owner, target uint32) (*fleetv1.FetchNowResponse, error) {
	if req.GetTaskId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a cancellation names the task to cancel")
	}
	delete(c.tasks, req.GetTaskId())
	if id, ok := c.unrideFeedCheck(key, req.GetTaskId()); ok {
		c.log.Info("on-demand check cancelled; the feed's check it rode on goes on", "key", req.GetKey(), "task", req.GetTaskId(), "node", id)
		return &fleetv1.FetchNowResponse{Owner: id}, nil
	}
	var reached uint32
	for i, id := range []uint32{owner, target} {
		if i == 1 && id == owner {
			break
		}
		if s := c.sessions[id]; id != 0 && s != nil {
			s.queueCancel(key, req.GetTaskId())
			if reached == 0 {
				reached = id
			}
		}
	}
	if reached == 0 {
		return nil, status.Errorf(codes.Unavailable, "the owner of %s (node %d) is not connected: it cannot be told to stop", req.GetKey(), owner)
	}
	c.log.Info("on-demand check cancelled", "key", req.GetKey(), "task", req.GetTaskId(), "node", reached)
	return &fleetv1.FetchNowResponse{Owner: reached}, nil
}
