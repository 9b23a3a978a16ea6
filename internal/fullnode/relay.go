package fullnode

import (
	"context"
	"net/http"
	"net/http/httputil"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/tunnel"
)

// The full tier's relays: a request for a repository that this full node
// does not serve (placed on other full nodes, or not pulled here yet) goes
// to the first of its replicas, in placement order, that has a link to
// this node, and every full node picks the same one while it is healthy:
// the two requests of a git fetch meet the same refs, whichever full node
// each reaches, with no sticky load balancer in front.
//
// The link is the tunnel that every full node opens to every other full
// node (package node's peerTunnels), through which it already serves its
// mirrors to them (read-only git, the runtime's tunnelHandler): a
// partial node's tunnel is never relayed to (replicas name full nodes
// only), a tunnel under a node's ID is that node's (its proof), and the
// holder answers what its own gitserve checks, from the routed request
// alone. The relay streams both ways (httputil.ReverseProxy, flushing
// every write); the bytes cross user space once here, read from the
// tunnel's multiplexed stream and written to the client: no splice is
// possible from a yamux stream.

// relayNode is the context key of the node a relayed request goes to.
type relayNode struct{}

// relayFor is gitserve's Relay: the handler of a request for key, which
// this node does not serve. nil (a 404) when the key has no replica but
// this node; the relay to its first replica with a tunnel to this node;
// or 503 with Retry-After when none has one.
func (f *Node) relayFor(key repokey.Key) http.Handler {
	f.mu.Lock()
	replicas := f.view.Replicas(key)
	f.mu.Unlock()
	self, others := f.n.ID(), false
	for _, id := range replicas {
		if id == self {
			continue
		}
		others = true
		if f.tunnels.Connected(id) {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.relay.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), relayNode{}, id)))
			})
		}
	}
	if !others {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.log.Warn("relay: no replica of the repository is reachable", "key", key.String(), "replicas", replicas)
		unavailable(w)
	})
}

// unavailable answers 503 with Retry-After: a replica may be back soon.
func unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	http.Error(w, "no full node that holds this repository is reachable; try again", http.StatusServiceUnavailable)
}

// newRelay is the reverse proxy of relayFor, through the tunnels of s. The
// holder is given the request's method, path, query and body, and of its
// headers only those git's protocol needs.
func (f *Node) newRelay(s *tunnel.Server) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			id, _ := pr.In.Context().Value(relayNode{}).(uint32)
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", tunnel.NodeHost(id), ""
			pr.Out.Header = http.Header{}
			for _, h := range []string{"Git-Protocol", "Content-Type", "Content-Length", "Accept"} {
				if v := pr.In.Header.Values(h); len(v) > 0 {
					pr.Out.Header[h] = v
				}
			}
		},
		Transport:     s.Transport(),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			id, _ := r.Context().Value(relayNode{}).(uint32)
			f.log.Warn("relay to a replica failed", "path", r.URL.Path, "node", id, "err", err)
			unavailable(w)
		},
	}
}
