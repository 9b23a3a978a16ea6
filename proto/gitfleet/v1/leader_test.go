package fleetv1

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestLeaderHintRoundTrip(t *testing.T) {
	if addr, ok := LeaderHint(NotLeaderError("coord-b:7070")); !ok || addr != "coord-b:7070" {
		t.Errorf("got %q, %v", addr, ok)
	}
	if addr, ok := LeaderHint(NotLeaderError("")); !ok || addr != "" {
		t.Errorf("no leader: got %q, %v", addr, ok)
	}
	// Through the wire: a status rebuilt from its proto form keeps the detail.
	wire := status.FromProto(status.Convert(NotLeaderError("x:1")).Proto()).Err()
	if addr, ok := LeaderHint(wire); !ok || addr != "x:1" {
		t.Errorf("after a round trip: got %q, %v", addr, ok)
	}
	for _, err := range []error{nil, errors.New("x"), status.Error(codes.Unavailable, "down"),
		fmt.Errorf("wrapped: %w", status.Error(codes.PermissionDenied, "no"))} {
		if _, ok := LeaderHint(err); ok {
			t.Errorf("%v taken for a not-leader answer", err)
		}
	}
}
