package node

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
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

// The class a node reports of a failed check: git's, or the node's own
// word where git has none.
func TestPublicClassOfAFailedCheck(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want repostate.Class
	}{
		{nil, repostate.NoClass},
		{&gitcmd.Error{Args: []string{"ls-remote"}, Class: gitcmd.ClassNotFound}, repostate.ClassNotFound},
		{fmt.Errorf("mirror k: %w", &gitcmd.Error{Class: gitcmd.ClassTooLarge}), repostate.ClassTooLarge},
		{&gitcmd.Error{Class: gitcmd.ClassTLS}, repostate.ClassUnreachable},
		{&gitcmd.Error{Class: gitcmd.ClassDisk}, repostate.ClassInternal},
		{fmt.Errorf("mirror k: %w", mirror.ErrEmptyAdvertisement), repostate.ClassEmpty},
		{fmt.Errorf("%w after 3s; the mirror is as it was", ErrCancelled), repostate.ClassCancelled},
		{fmt.Errorf("check k: %w", context.DeadlineExceeded), repostate.ClassTimeout},
		{fmt.Errorf("%w: the URL is another repository", repokey.ErrInvalid), repostate.ClassInvalid},
		{errors.New("open /srv/x: permission denied"), repostate.ClassOther},
	} {
		if got := PublicClass(tc.err); got != tc.want {
			t.Errorf("PublicClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
