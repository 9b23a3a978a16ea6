package node

import (
	"fmt"
	"testing"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/schedule"
)

// A blocked destination stays blocked: it must take the long backoff, not
// the transient one that retries within minutes.
func TestBlockedDestinationBacksOffLikeAuth(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("mirror k: %w", &egress.BlockedError{Dest: "127.1", Reason: "non-canonical"}),
		&gitcmd.Error{Class: gitcmd.ClassBlocked, Err: &egress.BlockedError{Dest: "a:443", Reason: "loopback"}},
	} {
		if got := failureClass(err); got != schedule.Auth {
			t.Errorf("failureClass(%v) = %v, want %v", err, got, schedule.Auth)
		}
		if got := gitcmd.ClassOf(err); got != gitcmd.ClassBlocked {
			t.Errorf("ClassOf(%v) = %v, want blocked", err, got)
		}
	}
}
