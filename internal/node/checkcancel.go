package node

import (
	"context"
	"errors"
	"slices"
)

// ErrCancelled is the cause of a check that the operator cancelled.
var ErrCancelled = errors.New("cancelled by the operator")

// runningCheck is a check in progress: the on-demand tasks it answers, and
// how to stop it.
type runningCheck struct {
	taskIDs []string
	cancel  context.CancelCauseFunc
}

// startCheck records that a check of key answering taskIDs starts, and
// returns its context (cancelCheck stops it with ErrCancelled) and the
// function that ends the record. Caller holds n.mu.
func (n *Node) startCheckLocked(ctx context.Context, key string, taskIDs []string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if n.running == nil {
		n.running = map[string]*runningCheck{}
	}
	rc := &runningCheck{taskIDs: taskIDs, cancel: cancel}
	n.running[key] = rc
	return ctx, func() {
		n.mu.Lock()
		if n.running[key] == rc {
			delete(n.running, key)
		}
		n.mu.Unlock()
		cancel(nil)
	}
}

// cancelCheck stops the on-demand check of key that taskID asked for:
// dropped if it waits for the next check, stopped if it is running (its
// git processes are killed with the context; the mirror keeps its refs).
func (n *Node) cancelCheck(key, taskID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if o := n.owned[key]; o != nil {
		if i := slices.Index(o.taskIDs, taskID); i >= 0 {
			o.taskIDs = slices.Delete(o.taskIDs, i, i+1)
			n.log.Info("on-demand check cancelled before it started", "key", key, "task", taskID)
		}
	}
	if rc := n.running[key]; rc != nil && slices.Contains(rc.taskIDs, taskID) {
		rc.cancel(ErrCancelled)
		n.log.Info("on-demand check cancelled: stopping its git processes", "key", key, "task", taskID)
	}
}

// cancelled tells whether the check whose context is ctx was cancelled by
// the operator.
func cancelled(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrCancelled) }
