package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gitfleet/gitfleet/internal/bandwidth"
)

// Resolver answers the addresses of a name. *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ResolverAt returns a resolver that asks only the DNS server at addr
// (host:port), over UDP and, for long answers, TCP: tests and operators
// who want gitfleet's answers from a resolver of their own (--dns-server).
func ResolverAt(addr string) *net.Resolver {
	var d net.Dialer
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
}

// Dialer connects only to destinations its Policy allows. It resolves a
// name once, checks every answer (one refused answer refuses the name:
// a mixed answer is how rebinding attacks start), and connects to a
// checked address, so that what was checked is what is dialled.
type Dialer struct {
	Policy *Policy
	// Resolver answers names (default net.DefaultResolver).
	Resolver Resolver
	// Timeout bounds one connection attempt (default 30 s).
	Timeout time.Duration
	// Received, when set, is told of every byte read from a connection
	// the dialer made (a node's count of bytes fetched from upstreams).
	Received func(n int)
	// Limit, when set, paces what is read from the connections the
	// dialer makes (a volunteer's cap on the node's bandwidth, which its
	// uploads share).
	Limit *bandwidth.Limiter
}

func (d *Dialer) resolver() Resolver {
	if d.Resolver != nil {
		return d.Resolver
	}
	return net.DefaultResolver
}

// Resolve checks host (a name or an address) and returns the addresses it
// may be dialled at on port, each checked. A refusal is a *BlockedError.
func (d *Dialer) Resolve(ctx context.Context, h string, port int) ([]netip.Addr, error) {
	hc, err := d.Policy.checkHost(h)
	if err != nil {
		return nil, err
	}
	if hc.addr.IsValid() {
		if !hc.allowed {
			if err := d.Policy.CheckAddr(hc.addr, port); err != nil {
				return nil, err
			}
		}
		return []netip.Addr{hc.addr}, nil
	}
	addrs, err := d.resolver().LookupNetIP(ctx, "ip", hc.name)
	if err != nil {
		return nil, fmt.Errorf("egress: resolve %s: %w", hc.name, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("egress: resolve %s: no address", hc.name)
	}
	if !hc.allowed {
		for _, a := range addrs {
			if err := d.Policy.CheckAddr(a, port); err != nil {
				be := err.(*BlockedError)
				return nil, blocked(net.JoinHostPort(hc.name, strconv.Itoa(port)), "resolves to %s: %s", a, be.Reason)
			}
		}
	}
	return addrs, nil
}

// DialContext connects to address (host:port) over network ("tcp",
// "tcp4" or "tcp6") if the policy allows it. It has the signature of
// net.Dialer's, for http.Transport.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	h, ps, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %q: %w", address, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port <= 0 || port > 65535 {
		return nil, blocked(address, "bad port")
	}
	addrs, err := d.Resolve(ctx, h, port)
	if err != nil {
		return nil, err
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	var errs []error
	for _, a := range addrs {
		target := netip.AddrPortFrom(a.Unmap(), uint16(port))
		nd := net.Dialer{Timeout: timeout, Control: pinned(target)}
		c, err := nd.DialContext(ctx, network, target.String())
		if err == nil {
			c = d.Limit.PaceReads(c)
			if d.Received != nil {
				c = countReads(c, d.Received)
			}
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("egress: dial %s: %w", address, errors.Join(errs...))
}

// pinned is a last guard: the socket connects to the address that was
// checked and to no other.
func pinned(want netip.AddrPort) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		got, err := netip.ParseAddrPort(address)
		if err != nil || got.Addr().Unmap() != want.Addr() || got.Port() != want.Port() {
			return blocked(address, "not the checked address %s", want)
		}
		return nil
	}
}

// CheckAnswers checks rawURL as CheckURL does and also resolves its host
// and checks every answer, whatever the scheme: fast feedback when an
// upstream is added. A name that does not resolve passes (it may later);
// only a refusal is an error.
func (d *Dialer) CheckAnswers(ctx context.Context, rawURL string) error {
	if err := d.Policy.CheckURL(rawURL); err != nil {
		return err
	}
	u, _ := url.Parse(rawURL) // parsed by CheckURL
	port := defaultPorts[strings.ToLower(u.Scheme)]
	if ps := u.Port(); ps != "" {
		port, _ = strconv.Atoi(ps)
	}
	if _, err := d.Resolve(ctx, u.Hostname(), port); IsBlocked(err) {
		return err
	}
	return nil
}

// CheckURL is the check made before each fetch: rawURL's scheme, host and
// port. An http or https connection is then made through the Proxy, whose
// DialContext resolves and checks the name; git:// and ssh:// connect by
// themselves, so for them the name is resolved here and every answer
// checked (git or ssh resolves it again: that second answer is not seen).
func (d *Dialer) CheckURL(ctx context.Context, rawURL string) error {
	if err := d.Policy.CheckURL(rawURL); err != nil {
		return err
	}
	u, _ := url.Parse(rawURL) // parsed by CheckURL
	scheme := strings.ToLower(u.Scheme)
	if scheme == "http" || scheme == "https" {
		return nil
	}
	port := defaultPorts[scheme]
	if ps := u.Port(); ps != "" {
		port, _ = strconv.Atoi(ps)
	}
	_, err := d.Resolve(ctx, u.Hostname(), port)
	return err
}

// countReads returns c with add told of every byte read from it.
func countReads(c net.Conn, add func(int)) net.Conn { return &countingConn{Conn: c, add: add} }

type countingConn struct {
	net.Conn
	add func(int)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.add(n)
	}
	return n, err
}

// CloseWrite half-closes the connection, as *net.TCPConn does (the proxy's
// splice passes a client's end of request on).
func (c *countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
