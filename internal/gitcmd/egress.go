package gitcmd

import (
	"fmt"
	"net/netip"
	"net/url"
)

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
// except those of a command marked Peer (Cmd.Peer), which reach this
// machine only.
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

// beginEgress routes c's connections: through the runner's Egress, unless
// the route is another or c reaches a peer (Cmd.Peer), whose URL must then
// name this machine, so that the way around the policy leads nowhere else.
func (r *Runner) beginEgress(c *Cmd) ([]string, func() error, error) {
	none := func() error { return nil }
	if r.route.kind != through {
		return nil, none, nil
	}
	if c.Peer {
		if len(c.Args) == 0 || !loopbackHTTP(c.Args[0]) {
			return nil, nil, fmt.Errorf("gitcmd: git %s to a peer names no http URL on a loopback address: a peer is reached through this machine's tunnel proxy", c.Name)
		}
		return nil, none, nil
	}
	env, end := r.route.egress.Begin()
	return env, end, nil
}

// loopbackHTTP tells whether u is an http URL whose host is a loopback
// address (an IP, not a name that a resolver could answer otherwise).
func loopbackHTTP(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" {
		return false
	}
	ip, err := netip.ParseAddr(p.Hostname())
	return err == nil && ip.IsLoopback()
}

// Local is r with its options (git, timeout, memory limit) routed
// LocalOnly: for git work between repositories of one data directory (a
// fork network's pool fetching its members' refs, package mirror), which
// an upstream's route would refuse as the file protocol.
func (r *Runner) Local() *Runner { return &Runner{route: LocalOnly(), opt: r.opt} }
