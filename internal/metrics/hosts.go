package metrics

import (
	"net/url"
	"strings"
	"sync"
)

// OtherHost is the label value of every host past a Hosts' cap, and of a
// URL with no host that can be read.
const OtherHost = "other"

// Hosts bounds the values of a host label: the first max distinct hosts
// seen keep their name, every later one is "other", so that a catalog of
// a million upstreams on many hosts cannot make a family grow without
// bound. It is safe for concurrent use.
type Hosts struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool
}

// NewHosts returns a bound of max distinct hosts.
func NewHosts(max int) *Hosts { return &Hosts{max: max, seen: map[string]bool{}} }

// Label returns the label value of rawURL's host: the host in lower case
// (without a port, user or path), or "other".
func (h *Hosts) Label(rawURL string) string {
	host := hostOf(rawURL)
	if host == "" {
		return OtherHost
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen[host] {
		return host
	}
	if len(h.seen) >= h.max {
		return OtherHost
	}
	h.seen[host] = true
	return host
}

// hostOf is the host of a URL (http, https, git, ssh) or of an scp-like
// address (git@host:path), in lower case, without its port; "" if none.
func hostOf(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		return strings.ToLower(u.Hostname())
	}
	if !strings.Contains(rawURL, "://") {
		if at, rest, ok := strings.Cut(rawURL, "@"); ok && at != "" {
			rawURL = rest
		}
		if host, _, ok := strings.Cut(rawURL, ":"); ok && host != "" && !strings.ContainsAny(host, "/") {
			return strings.ToLower(host)
		}
	}
	return ""
}
