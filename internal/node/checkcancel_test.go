package node

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
)

func TestCancelDropsAWaitingTaskAndStopsOnlyTheCheckOfItsTask(t *testing.T) {
	n := &Node{log: slog.New(slog.DiscardHandler), owned: map[string]*owned{
		"h/a": {taskIDs: []string{"t1", "t2"}},
		"h/b": {},
	}}
	n.mu.Lock()
	ctxA, endA := n.startCheckLocked(context.Background(), "h/a", []string{"t0"})
	ctxB, endB := n.startCheckLocked(context.Background(), "h/b", nil) // a background check
	n.mu.Unlock()
	defer endA()
	defer endB()

	n.cancelCheck("h/a", "t1") // waits for the next check: dropped
	if got := n.owned["h/a"].taskIDs; !slices.Equal(got, []string{"t2"}) {
		t.Errorf("waiting tasks %q, want t2", got)
	}
	if ctxA.Err() != nil {
		t.Error("the running check of another task was stopped")
	}
	n.cancelCheck("h/b", "t0") // not the task of h/b's check
	if ctxB.Err() != nil {
		t.Error("a background check was stopped for a task it does not answer")
	}
	n.cancelCheck("h/a", "t0")
	if !cancelled(ctxA) || !errors.Is(context.Cause(ctxA), ErrCancelled) {
		t.Errorf("the check of t0: err %v, cause %v", ctxA.Err(), context.Cause(ctxA))
	}
	endA()
	if _, ok := n.running["h/a"]; ok {
		t.Error("an ended check is still recorded as running")
	}
}
