package fleetv1

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ReasonRevoked is the ErrorInfo reason of RevokedError.
const ReasonRevoked = "REVOKED"

// RevokedError is what a revoked node's registration and session end
// with: codes.PermissionDenied, saying why, with an ErrorInfo that
// IsRevoked finds.
func RevokedError(id uint32, reason string) error {
	st := status.New(codes.PermissionDenied, fmt.Sprintf("node %d was revoked: %s", id, reason))
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonRevoked, Domain: ErrorDomain}); err == nil {
		st = withInfo
	}
	return st.Err()
}

// IsRevoked reports whether err is a RevokedError.
func IsRevoked(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.PermissionDenied {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == ReasonRevoked && info.GetDomain() == ErrorDomain {
			return true
		}
	}
	return false
}
