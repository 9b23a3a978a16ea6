package fleetv1

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A coordinator that is not the fleet's leader (several coordinators
// sharing one fleet through etcd) answers every call with
// codes.Unavailable and an ErrorInfo of this reason and domain, whose
// metadata names the leader's address when it knows it.
const (
	ReasonNotLeader = "NOT_LEADER"
	ErrorDomain     = "gitfleet"
	leaderKey       = "leader"
)

// NotLeaderError is the error of a coordinator that is not the leader;
// leader is the leader's advertised gRPC address, "" if unknown.
func NotLeaderError(leader string) error {
	msg := "this coordinator is not the fleet's leader"
	if leader != "" {
		msg += "; the leader is at " + leader
	} else {
		msg += " and no leader is elected yet"
	}
	st := status.New(codes.Unavailable, msg)
	info := &errdetails.ErrorInfo{Reason: ReasonNotLeader, Domain: ErrorDomain}
	if leader != "" {
		info.Metadata = map[string]string{leaderKey: leader}
	}
	if withInfo, err := st.WithDetails(info); err == nil {
		st = withInfo
	}
	return st.Err()
}

// LeaderHint reports whether err is a NotLeaderError, and the leader's
// address it names ("" if none).
func LeaderHint(err error) (leader string, notLeader bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return "", false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == ReasonNotLeader && info.GetDomain() == ErrorDomain {
			return info.GetMetadata()[leaderKey], true
		}
	}
	return "", false
}
