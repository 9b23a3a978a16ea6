package gitcmd

import "context"

// ClassBlocked is a connection the egress policy refused: the destination
// (an address, a name's answer, a port or a scheme) may not be reached.
// Its message is the policy's ("blocked destination: ..."), never git's.
const ClassBlocked Class = "blocked"

// Egress routes the connections of git processes that reach upstreams
// (egress.Proxy is one).
type Egress interface {
	// Begin returns environment variables for one git process, and a
	// function to call once it has ended, which returns the refusal that
	// failed one of its connections, if any.
	Begin() (env []string, end func() error)
}

type peerKey struct{}

// Peer marks ctx: git commands run under it reach a gitfleet peer on this
// machine (a full node's pull from an owner, through its loopback tunnel
// proxy), not an upstream, and so do not go through Runner.Egress.
// Everything not marked does.
func Peer(ctx context.Context) context.Context {
	return context.WithValue(ctx, peerKey{}, true)
}

func (r *Runner) beginEgress(ctx context.Context) ([]string, func() error) {
	if r.Egress == nil || ctx.Value(peerKey{}) != nil {
		return nil, func() error { return nil }
	}
	return r.Egress.Begin()
}
