// Package repokey turns upstream URLs into repository keys, the one name of
// a repository everywhere in gitfleet: on the ring, on disk, in the API and
// in public clone URLs. A key is the URL normalised: lower-case host (with
// the port when it is not the scheme's default), the path without ".git" and
// trailing slashes in canonical form (ASCII only; lower-cased on hosts whose
// paths are case-insensitive, kept elsewhere: see canonical.go), no scheme,
// no credentials. It validates URLs as hostile input: only allowed schemes,
// no credentials, nothing that could escape a data directory or be read by
// git as an option. A key so checked is a Key (key.go): only this
// package's parsers make one (Batch, in fastkey.go, makes a catalog's
// million without parsing a URL each), and code that holds one does not
// check it again. Redact hides credentials wherever a URL is shown.
//
// It does no I/O (no DNS): the host is checked against the egress policy
// without resolving it (see Options.Egress); the egress dialer is what
// enforces where connections are made.
package repokey

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/egress"
)

// MaxKeyLen bounds a key's length (it becomes a path on disk).
const MaxKeyLen = 512

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid repository URL")

// Options say which URLs are acceptable.
type Options struct {
	// AllowPrivate allows upstreams on loopback, private and link-local
	// addresses and "localhost" (tests and the demo need it; a public
	// mirror should not fetch from its own network).
	AllowPrivate bool
	// Egress, when set, is the operator's egress policy, used instead of
	// the default one that AllowPrivate selects.
	Egress *egress.Policy
	// Fold says which hosts' paths are case-insensitive (the zero value:
	// github.com and gitee.com).
	Fold Folding
}

// Normalize validates rawURL and returns its key and the URL to fetch
// (cleaned: scp-like "git@host:path" becomes ssh://git@host/path). It is
// the parser of URLs at the edges: a catalog's entry, an API call's or a
// webhook's URL.
func Normalize(rawURL string, opt Options) (key Key, fetchURL string, err error) {
	fail := func(format string, a ...any) (Key, string, error) {
		return "", "", fmt.Errorf("%w %q: %s", ErrInvalid, truncate(Redact(rawURL)), fmt.Sprintf(format, a...))
	}
	s := rawURL
	if s == "" {
		return fail("empty")
	}
	if strings.TrimSpace(s) != s {
		return fail("leading or trailing white space")
	}
	if strings.HasPrefix(s, "-") {
		return fail("starts with '-'")
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f {
			return fail("contains a space or control character")
		}
	}
	if !strings.Contains(s, "://") {
		// scp-like syntax: [user@]host:path
		at := strings.Index(s, "@")
		colon := strings.Index(s, ":")
		if colon > 0 && (at < 0 || at < colon) && !strings.Contains(s[:colon], "/") {
			s = "ssh://" + s[:colon] + "/" + strings.TrimPrefix(s[colon+1:], "/")
		} else {
			return fail("not a URL (want https://host/path)")
		}
	}
	u, perr := url.Parse(s)
	if perr != nil {
		return fail("cannot parse: %v", perr)
	}
	scheme := strings.ToLower(u.Scheme)
	defaultPort, ok := egress.DefaultPort(scheme)
	if !ok {
		return fail("scheme %q is not allowed (https, http, git, ssh)", u.Scheme)
	}
	if u.User != nil {
		if _, hasPass := u.User.Password(); hasPass || scheme != "ssh" {
			return fail("credentials in the URL are not allowed")
		}
		if !validSSHUser(u.User.Username()) {
			return fail("bad ssh user name (letters, digits and . _ - only, not starting with '-')")
		}
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fail("query strings and fragments are not allowed")
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return fail("no host")
	}
	if !validHost(host) {
		return fail("bad host %q", host)
	}
	if err := opt.policy().CheckHost(host); err != nil {
		return "", "", fmt.Errorf("%w %q: %w", ErrInvalid, truncate(Redact(rawURL)), err)
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return fail("bad port %q", port)
		}
		port = strconv.FormatUint(n, 10) // one spelling: "0443" is 443
		if int(n) == defaultPort {
			port = ""
		} else if other, ok := egress.SchemeOfPort(int(n)); ok {
			return fail("port %s is %s's, not %s's", port, other, scheme)
		}
	}
	if rawPath := s[strings.Index(s, "://")+3:]; strings.Contains(rawPath[max(strings.IndexByte(rawPath, '/'), 0):], "%") {
		return fail("percent-escapes in the path are not allowed")
	}
	path := u.Path
	for strings.HasSuffix(path, "/") {
		path = strings.TrimSuffix(path, "/")
	}
	path = strings.TrimSuffix(path, ".git")
	for strings.HasSuffix(path, "/") {
		path = strings.TrimSuffix(path, "/")
	}
	path = strings.TrimPrefix(path, "/")
	if path == "" {
		return fail("no repository path")
	}
	hostPart := host
	if strings.Contains(host, ":") { // IPv6 literal
		hostPart = "[" + host + "]"
	}
	if port != "" {
		hostPart += ":" + port
	}
	path, err = canonicalPath(path, opt.Fold.Folds(hostPart))
	if err != nil {
		return fail("path: %v", err)
	}
	if len(hostPart)+1+len(path) > MaxKeyLen {
		return fail("key longer than %d bytes", MaxKeyLen)
	}
	key = Key(hostPart + "/" + path)
	u.Scheme = scheme
	u.Host = strings.ToLower(u.Host)
	return key, u.String(), nil
}

// validKeyHost checks the host part of a key: a lower-case name or IP
// address, with a port.
func validKeyHost(host string) bool {
	h := host
	if hp, port, err := net.SplitHostPort(host); err == nil {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
			return false // a port is a number, written one way
		}
		h = hp
	}
	h = strings.Trim(h, "[]")
	return validHost(h) && strings.ToLower(host) == host
}

// Host returns the host part of a key (with port), for per-host limits.
func Host(key string) string {
	h, _, _ := strings.Cut(key, "/")
	return h
}

// validSSHUser accepts the user of an ssh URL (git, gitolite3, ...): it
// reaches ssh's command line, so nothing that could be read as an option.
func validSSHUser(u string) bool {
	if u == "" || len(u) > 64 || u[0] == '-' {
		return false
	}
	for i := 0; i < len(u); i++ {
		if c := u[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Zone() == "" // a zone names an interface of this machine
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return !strings.HasPrefix(h, "-") && !strings.HasPrefix(h, ".")
}

func (o Options) policy() *egress.Policy {
	if o.Egress != nil {
		return o.Egress
	}
	return egress.Default(o.AllowPrivate)
}

func truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
