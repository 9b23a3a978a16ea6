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

// Route says where the connections of a Runner's git processes may go. A
// Runner is built with one (New): there is no default, so that a runner
// that reaches upstreams without the egress policy cannot be written by
// leaving a field out.
type Route struct {
	kind   routeKind
	egress Egress
}

type routeKind uint8

const (
	unchosen  routeKind = iota // the zero Route: New refuses it
	through                    // every connection through an Egress
	direct                     // straight out, unchecked
	localOnly                  // no connection: the file protocol alone
)

// Through routes every connection through e (the node's egress proxy),
// except the commands run under a context marked by Peer.
func Through(e Egress) Route {
	if e == nil {
		panic("gitcmd: Through(nil): give the egress policy, or choose LocalOnly()")
	}
	return Route{kind: through, egress: e}
}

// Direct lets git connect straight out, checked by no egress policy: only
// for remotes an operator named (the catalog repository) and for tests'
// own servers, never for an upstream's URL.
func Direct() Route { return Route{kind: direct} }

// LocalOnly lets git reach nothing but this machine: the protocol
// allow-list is "file" alone, whatever Options.Protocols says. For work on
// the mirrors on disk, serving them, and reading repositories by path.
func LocalOnly() Route { return Route{kind: localOnly} }

type peerKey struct{}

// Peer marks ctx: git commands run under it reach a gitfleet peer on this
// machine (a full node's pull from an owner, through its loopback tunnel
// proxy), not an upstream, and so do not go through the Runner's Egress.
// Everything not marked does.
func Peer(ctx context.Context) context.Context {
	return context.WithValue(ctx, peerKey{}, true)
}

func (r *Runner) beginEgress(ctx context.Context) ([]string, func() error) {
	if r.route.kind != through || ctx.Value(peerKey{}) != nil {
		return nil, func() error { return nil }
	}
	return r.route.egress.Begin()
}
