package fullnode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"

	"github.com/gitfleet/gitfleet/internal/console"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/tunnel"
)

// The full tier's relays: a request for a repository that this full node
// does not serve (placed on other full nodes, or not pulled here yet) goes
// to the first of its replicas, in placement order, that has a link to
// this node and answers for it, and every full node picks the same one
// while it is healthy: the two requests of a git fetch meet the same refs,
// whichever full node each reaches, with no sticky load balancer in front.
// A replica that answers 404 or 503 (not pulled yet, its disk full), or
// whose link fails before the answer starts, is passed over for the next.
//
// What is relayed: git smart HTTP (gitserve's Relay), and the
// repository's reads that show its copy, the API's detail and fetch log
// (api.Server.RepoOf) and the public status and badge (console.RepoOf).
// Lists, search, counters, /metrics and the rest of the console are
// answered here, from the view every full node has.
//
// The link is the tunnel that every full node opens to every other full
// node (package node's peerTunnels), through which it already serves its
// mirrors to them (read-only git, the runtime's tunnelHandler) and, on a
// full node, the relayed reads (relayedReads): a partial node's tunnel is
// never relayed to (replicas name full nodes only), a tunnel under a
// node's ID is that node's (its proof), and the holder answers what its
// own gitserve checks, from the routed request alone. An API read carries
// the rights the caller has here (api.Server.RelayHeaders), never the
// caller's token. The relay streams both ways (httputil.ReverseProxy,
// flushing every write); the bytes cross user space once here, read from
// the tunnel's multiplexed stream and written to the client: no splice is
// possible from a yamux stream.

// relayRoute is the context value of a relayed request: the replicas to
// try, in placement order, the one tried now, and what answers when none
// does.
type relayRoute struct {
	key      repokey.Key
	ids      []uint32
	i        int
	fallback http.Handler
	// header is what a read carries (api.Server.RelayHeaders); nil for
	// git, which carries the headers its protocol needs.
	header http.Header
}

type relayRouteKey struct{}

func routeOf(r *http.Request) *relayRoute {
	rt, _ := r.Context().Value(relayRouteKey{}).(*relayRoute)
	return rt
}

// errPassedOver is a replica's answer that sends the relay to the next
// replica: it does not have the repository now.
type errPassedOver struct{ status int }

func (e errPassedOver) Error() string {
	return fmt.Sprintf("the replica answered %d %s", e.status, http.StatusText(e.status))
}

// relayFor is gitserve's Relay: the handler of a git request for key,
// which this node does not serve. nil (a 404) when the key has no replica
// but this node; the relay to its replicas with a tunnel to this node; or
// 503 with Retry-After when none has one, or none answers for it.
func (f *Node) relayFor(key repokey.Key) http.Handler {
	return f.relayTo(key, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { unavailable(w) }), nil)
}

// replicasReachable returns key's replicas other than this node that have
// a link to it, in placement order, and whether it has any other replica
// at all.
func (f *Node) replicasReachable(key repokey.Key) (ids []uint32, others bool) {
	f.mu.Lock()
	replicas := f.view.Replicas(key)
	f.mu.Unlock()
	self := f.n.ID()
	for _, id := range replicas {
		if id == self {
			continue
		}
		others = true
		if f.tunnels.Connected(id) {
			ids = append(ids, id)
		}
	}
	return ids, others
}

// relayTo relays a request for key to its replicas (replicasReachable),
// with header for a read (nil: git); fallback answers when none is
// reachable or none answers for key. nil when key has no replica but this
// node.
func (f *Node) relayTo(key repokey.Key, fallback http.Handler, header func(*http.Request) http.Header) http.Handler {
	ids, others := f.replicasReachable(key)
	if !others {
		return nil
	}
	if len(ids) == 0 {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.log.Warn("relay: no replica of the repository is reachable", "key", key.String())
			fallback.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := &relayRoute{key: key, ids: ids, fallback: fallback}
		if header != nil {
			rt.header = header(r)
		}
		f.relay.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), relayRouteKey{}, rt)))
	})
}

// relayReads answers local's per-repository reads (repoOf) of a
// repository this node does not serve from one of its replicas, with
// header's headers; the rest, and a read no replica answers, local
// answers.
func (f *Node) relayReads(local http.Handler, repoOf func(*http.Request) (repokey.Key, bool), header func(*http.Request) http.Header) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key, ok := repoOf(r); ok {
			if _, served := f.resolve(key); !served {
				if h := f.relayTo(key, local, header); h != nil {
					h.ServeHTTP(w, r)
					return
				}
			}
		}
		local.ServeHTTP(w, r)
	})
}

// consoleRepoOf is the repository of a status page or badge request
// (console.RepoOf), checked here, where it arrives.
func consoleRepoOf(r *http.Request) (repokey.Key, bool) {
	s, ok := console.RepoOf(r)
	if !ok {
		return "", false
	}
	return keyOf(s)
}

// noHeaders is the header of a relayed read that needs none of the
// caller's (the public status and badge).
func noHeaders(*http.Request) http.Header { return http.Header{} }

// relayedReads is what this full node answers, through its tunnels, to
// the reads another full node relays (relayReads): those of a repository
// served here. Any other is a 404, which sends the relaying node to the
// next replica.
func (f *Node) relayedReads() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := http.Handler(http.HandlerFunc(f.api.ServeRelayed))
		key, ok := f.api.RepoOf(r)
		if !ok {
			h = f.console
			key, ok = consoleRepoOf(r)
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		if _, served := f.resolve(key); !served {
			http.Error(w, "this full node does not serve "+key.String()+" now", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// unavailable answers 503 with Retry-After: a replica may be back soon.
func unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	http.Error(w, "no full node that holds this repository is reachable; try again", http.StatusServiceUnavailable)
}

// newRelay is the reverse proxy of relayTo, through the tunnels of s. The
// holder is given the request's method, path, query and body, and of its
// headers only those git's protocol needs, or a read's (relayRoute). A
// replica that answers 404 or 503, or whose link fails before the answer
// starts, is passed over for the next; past the last, the route's fallback
// answers.
func (f *Node) newRelay(s *tunnel.Server) *httputil.ReverseProxy {
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rt := routeOf(pr.In)
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", tunnel.NodeHost(rt.ids[rt.i]), ""
			pr.Out.Header = http.Header{}
			keep := []string{"Git-Protocol", "Content-Type", "Content-Length", "Accept"}
			if rt.header != nil {
				pr.Out.Header, pr.Out.Host = rt.header.Clone(), pr.In.Host // the console's links: as the caller reached us
				keep = []string{"Accept"}
			}
			for _, h := range keep {
				if v := pr.In.Header.Values(h); len(v) > 0 {
					pr.Out.Header[h] = v
				}
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusServiceUnavailable {
				return errPassedOver{resp.StatusCode}
			}
			return nil
		},
		Transport:     s.Transport(),
		FlushInterval: -1,
	}
	p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		rt := routeOf(r)
		var passed errPassedOver
		if errors.As(err, &passed) {
			f.log.Info("relay: a replica does not serve the repository now; trying the next", "key", rt.key.String(), "node", rt.ids[rt.i], "status", passed.status)
		} else {
			f.log.Warn("relay to a replica failed; trying the next", "key", rt.key.String(), "path", r.URL.Path, "node", rt.ids[rt.i], "err", err)
		}
		if rt.i++; rt.i < len(rt.ids) && r.Context().Err() == nil {
			if r.GetBody != nil {
				body, berr := r.GetBody()
				if berr == nil {
					r.Body = body
					p.ServeHTTP(w, r)
					return
				}
			} else if r.ContentLength == 0 {
				p.ServeHTTP(w, r)
				return
			}
		}
		rt.fallback.ServeHTTP(w, r)
	}
	return p
}
