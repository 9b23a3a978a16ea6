// Package egress is gitfleet's one policy for outgoing connections to
// upstreams and webhooks: which schemes, hosts, addresses and ports may be
// reached. A Policy is pure (no I/O): it refuses host names that are not
// canonical on the internet and addresses in an explicit deny table built
// from the IANA special-purpose registries, unless the operator allowed
// them. A Dialer enforces it where connections are made: it resolves a name
// once, checks every answer, and connects only to a checked address. A Proxy
// puts git's own connections behind that dialer.
//
// Every refusal is a *BlockedError, whose message starts with
// "blocked destination".
package egress

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// BlockedError is a destination the policy refuses. It is returned before
// any connection to it is attempted.
type BlockedError struct {
	Dest   string // what was refused: a URL's host, host:port, or an address
	Reason string
}

func (e *BlockedError) Error() string {
	return "blocked destination: " + e.Dest + ": " + e.Reason
}

func blocked(dest, format string, a ...any) *BlockedError {
	return &BlockedError{Dest: dest, Reason: fmt.Sprintf(format, a...)}
}

// IsBlocked reports whether err is or wraps a *BlockedError.
func IsBlocked(err error) bool {
	var be *BlockedError
	return errors.As(err, &be)
}

// defaultPorts are the ports of the schemes gitfleet knows: the one table
// of them (repokey reads it through DefaultPort and SchemeOfPort).
var defaultPorts = map[string]int{"https": 443, "http": 80, "git": 9418, "ssh": 22}

// DefaultPort is the port of a URL of scheme (lower case) that names none,
// and whether gitfleet knows the scheme (https, http, git, ssh).
func DefaultPort(scheme string) (int, bool) {
	port, ok := defaultPorts[scheme]
	return port, ok
}

// SchemeOfPort is the known scheme whose default port is port, if any.
func SchemeOfPort(port int) (string, bool) {
	for scheme, p := range defaultPorts {
		if p == port {
			return scheme, true
		}
	}
	return "", false
}

// Config is what an operator sets.
type Config struct {
	// Allow are CIDR prefixes, IP addresses, host names ("git.lan") and
	// name suffixes ("*.corp.example") that may be reached although the
	// policy would refuse them, on any port. Tests and the demo allow
	// 127.0.0.1.
	Allow []string
	// AllowPrivate allows loopback and private ranges and the localhost
	// names, on any port (--allow-private-upstreams).
	AllowPrivate bool
	// Schemes are the URL schemes upstreams may use (default https, http;
	// git and ssh only when listed).
	Schemes []string
	// Ports are ports allowed besides the default ports of the schemes.
	Ports []int
}

// privateRanges is what AllowPrivate allows.
var privateRanges = []string{"127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
	"100.64.0.0/10", "169.254.0.0/16", "::1/128", "fc00::/7", "fe80::/10"}

// Policy decides which destinations may be reached. It is immutable and
// safe for concurrent use.
type Policy struct {
	nets     []netip.Prefix
	names    map[string]bool
	suffixes []string // ".corp.example"
	schemes  []string
	ports    map[int]bool
}

// New checks cfg and returns its policy.
func New(cfg Config) (*Policy, error) {
	p := &Policy{names: map[string]bool{}, ports: map[int]bool{}}
	allow := cfg.Allow
	if cfg.AllowPrivate {
		allow = append(slices.Clone(allow), privateRanges...)
		p.names["localhost"] = true
		p.suffixes = append(p.suffixes, ".localhost")
	}
	for _, a := range allow {
		a = strings.ToLower(strings.TrimSpace(a))
		if pfx, err := netip.ParsePrefix(a); err == nil {
			p.nets = append(p.nets, pfx.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(a); err == nil {
			p.nets = append(p.nets, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		name := strings.TrimSuffix(a, ".")
		wild := strings.HasPrefix(name, "*.")
		name = strings.TrimPrefix(name, "*.")
		if name == "" || !validName(name) || endsInNumber(name) {
			return nil, fmt.Errorf("egress: allow entry %q: want a CIDR prefix, an IP address, a host name or *.suffix", a)
		}
		if wild {
			p.suffixes = append(p.suffixes, "."+name)
		} else {
			p.names[name] = true
		}
	}
	schemes := cfg.Schemes
	if len(schemes) == 0 {
		schemes = []string{"https", "http"}
	}
	for _, s := range schemes {
		s = strings.ToLower(strings.TrimSpace(s))
		port, ok := defaultPorts[s]
		if !ok {
			return nil, fmt.Errorf("egress: scheme %q: want https, http, git or ssh", s)
		}
		if !slices.Contains(p.schemes, s) {
			p.schemes = append(p.schemes, s)
		}
		p.ports[port] = true
	}
	for _, port := range cfg.Ports {
		if port <= 0 || port > 65535 {
			return nil, fmt.Errorf("egress: port %d out of range", port)
		}
		p.ports[port] = true
	}
	return p, nil
}

// Default is the policy of an operator who set nothing but, perhaps,
// --allow-private-upstreams.
func Default(allowPrivate bool) *Policy {
	if allowPrivate {
		return privatePolicy
	}
	return strictPolicy
}

// The two default policies, built once and never modified.
var (
	strictPolicy  = must(New(Config{}))
	privatePolicy = must(New(Config{AllowPrivate: true}))
)

func must(p *Policy, err error) *Policy {
	if err != nil {
		panic(err)
	}
	return p
}

// Schemes are the schemes upstreams may use, in the form of
// GIT_ALLOW_PROTOCOL ("https:http").
func (p *Policy) Schemes() string { return strings.Join(p.schemes, ":") }

// allowedAddr reports whether the operator allowed a.
func (p *Policy) allowedAddr(a netip.Addr) bool {
	a = a.WithZone("")
	for _, n := range p.nets {
		if n.Contains(a) || (a.Is4In6() && n.Contains(a.Unmap())) {
			return true
		}
	}
	return false
}

// allowedName reports whether the operator allowed the host name h (lower
// case, without a trailing dot).
func (p *Policy) allowedName(h string) bool {
	if p.names[h] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// host is what the name check learnt of a host.
type host struct {
	addr    netip.Addr // set when the host is an IP address
	name    string     // lower case, without a trailing dot, when it is a name
	allowed bool       // the operator allowed it: any address, any port
}

// checkHost checks the spelling of h (a URL's host, brackets allowed) and,
// for an IP address, the address. A name still has to be resolved.
func (p *Policy) checkHost(h string) (host, error) {
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if h == "" {
		return host{}, blocked(`""`, "no host")
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return host{}, blocked(h, "scoped IPv6 address")
		}
		if p.allowedAddr(a) {
			return host{addr: a, allowed: true}, nil
		}
		if r := denied(a); r != "" {
			return host{}, blocked(h, "%s", r)
		}
		return host{addr: a}, nil
	}
	name := strings.ToLower(h)
	trimmed := strings.TrimSuffix(name, ".")
	if endsInNumber(trimmed) {
		// 2130706433, 0x7f.1, 0177.0.0.1, 127.1 and 0 are IPv4 addresses to
		// curl and to the C library, never names on the internet.
		return host{}, blocked(h, "non-canonical IPv4 address spelling (write an IPv4 address as four decimal numbers)")
	}
	if !validName(trimmed) {
		return host{}, blocked(h, "not a valid host name")
	}
	if p.allowedName(trimmed) {
		return host{name: trimmed, allowed: true}, nil
	}
	switch {
	case trimmed != name:
		return host{}, blocked(h, "host name ends in a dot (absolute form; write it without the dot)")
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return host{}, blocked(h, "localhost name (RFC 6761)")
	case !strings.Contains(name, "."):
		return host{}, blocked(h, "single-label name (resolved through the machine's own search domains)")
	}
	if tld := specialTLD(name); tld != "" {
		return host{}, blocked(h, "special-use or local name (.%s)", tld)
	}
	return host{name: name}, nil
}

// specialTLDs are names that only mean something on a local network
// (RFC 6761, 6762, 8375, 9476, and ICANN's .internal).
var specialTLDs = []string{"local", "internal", "home.arpa", "lan", "localdomain", "intranet",
	"invalid", "test", "example", "onion", "alt"}

// LocalOnlyName reports whether name (lower case, without a trailing dot)
// only means something on a local network: localhost, *.localhost or a
// special-use suffix (specialTLDs). It allocates nothing and looks at the
// last label only, for callers that check a million catalog lines.
func LocalOnlyName(name []byte) bool {
	last := name[bytes.LastIndexByte(name, '.')+1:]
	switch string(last) {
	case "localhost", "local", "internal", "lan", "localdomain", "intranet", "invalid", "test", "example", "onion", "alt":
		return true
	case "arpa":
		return string(name) == "home.arpa" || bytes.HasSuffix(name, []byte(".home.arpa"))
	}
	return false
}

func specialTLD(name string) string {
	for _, t := range specialTLDs {
		if name == t || strings.HasSuffix(name, "."+t) {
			return t
		}
	}
	return ""
}

// endsInNumber is the WHATWG URL standard's test: a host whose last label
// is a number (decimal, or hexadecimal with 0x) is parsed as IPv4.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		for _, c := range []byte(last[2:]) {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
		return true
	}
	for _, c := range []byte(last) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validName accepts LDH labels (and '_', which some hosts use) of 1 to 63
// bytes, 253 bytes in all.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// CheckHost checks a URL's host without resolving it: its spelling, and
// the address when it is an IP address. It is the parse-time check, for
// fast feedback; the Dialer is what enforces.
func (p *Policy) CheckHost(h string) error {
	_, err := p.checkHost(h)
	return err
}

// CheckURL checks an upstream or webhook URL without resolving it: its
// scheme, its host and its port.
func (p *Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return blocked(truncate(raw), "not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if !slices.Contains(p.schemes, scheme) {
		return blocked(truncate(raw), "scheme %q is not enabled (--egress-schemes: %s)", scheme, strings.Join(p.schemes, ", "))
	}
	h, err := p.checkHost(u.Hostname())
	if err != nil {
		return err
	}
	port := defaultPorts[scheme]
	if ps := u.Port(); ps != "" {
		if port, err = strconv.Atoi(ps); err != nil || port <= 0 || port > 65535 {
			return blocked(u.Host, "bad port")
		}
	}
	if !h.allowed && !p.ports[port] {
		return blocked(u.Host, "port %d is not allowed (--egress-ports)", port)
	}
	return nil
}

// CheckAddr checks one address that a name resolved to, or that is about
// to be dialled, with its port.
func (p *Policy) CheckAddr(a netip.Addr, port int) error {
	if p.allowedAddr(a) {
		return nil
	}
	if r := denied(a); r != "" {
		return blocked(net.JoinHostPort(a.String(), strconv.Itoa(port)), "%s", r)
	}
	if !p.ports[port] {
		return blocked(net.JoinHostPort(a.String(), strconv.Itoa(port)), "port %d is not allowed (--egress-ports)", port)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
