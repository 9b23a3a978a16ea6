package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Relayed reads: on the full tier a full node that does not hold a
// repository relays its per-repository reads (RepoOf) to a full node that
// does, over the link between them (package fullnode, relay.go). The
// answer is the holder's (its refs, its history, its fetch log), given
// with the rights the caller has on the node it called: that node decides
// whether the caller is the operator, with its own token, and says so in
// RelayHeaders; the caller's token itself never leaves it. The holder
// reads those headers only in ServeRelayed, which only the link reaches:
// on the public port they mean nothing.

const (
	// relayOperator says the caller showed the relaying node's API token.
	relayOperator = "Gitfleet-Relay-Operator"
	// relayBase is the base of clone URLs as the caller reached the
	// relaying node (scheme and host).
	relayBase = "Gitfleet-Relay-Base"
)

// relayedCall is the context value of a request ServeRelayed serves.
type relayedCall struct {
	operator bool
	base     string
}

type relayedKey struct{}

// RepoOf returns the repository that r reads, canonical, when r is a
// per-repository read that a holder of the repository answers: GET of its
// detail, of its fetch log (/api/v1/repos/{key}/log), of its archive
// (/api/v1/repos/{key}/archive), or of the fetch log
// filtered to it (/api/v1/log?key=). Lists, counters and writes are
// answered where they arrive.
func (s *Server) RepoOf(r *http.Request) (repokey.Key, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	raw, ok := strings.CutPrefix(r.URL.Path, "/api/v1/repos/")
	if !ok {
		if r.URL.Path != "/api/v1/log" || r.URL.Query().Get("key") == "" {
			return "", false
		}
		raw = r.URL.Query().Get("key")
	} else if base, isLog := s.isLogPath(raw); isLog {
		raw = base
	} else if base, isArchive := s.isArchivePath(raw); isArchive {
		raw = base
	}
	k, err := s.cfg.Fold.Canonical(raw)
	if err != nil {
		return "", false
	}
	return k, true
}

// RelayHeaders returns the headers that a relay of r carries to the
// holder: the caller's rights here (the operator's, with this node's API
// token, or the public's) and the base of clone URLs as it reached this
// node. The Authorization header itself is not among them.
func (s *Server) RelayHeaders(r *http.Request) http.Header {
	h := http.Header{}
	if s.operator(r) {
		h.Set(relayOperator, "1")
	}
	h.Set(relayBase, s.cloneBase(r))
	return h
}

// ServeRelayed serves a read that another full node relayed over the link
// between full nodes, with the rights and the clone base that node's
// RelayHeaders gave it; the request's own Authorization is ignored. Only
// reads are served (405 otherwise).
func (s *Server) ServeRelayed(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed("GET")(w, r)
		return
	}
	call := relayedCall{operator: r.Header.Get(relayOperator) == "1", base: r.Header.Get(relayBase)}
	r = r.Clone(context.WithValue(r.Context(), relayedKey{}, call))
	r.Header.Del("Authorization")
	s.ServeHTTP(w, r)
}

// relayed returns the relayed call r is, if it is one.
func relayed(r *http.Request) (relayedCall, bool) {
	c, ok := r.Context().Value(relayedKey{}).(relayedCall)
	return c, ok
}
