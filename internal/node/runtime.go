package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// What the runtime offers the role built on it (package fullnode) beside
// the hooks it calls (Role): its parts, its identity and session, and the
// operations on the mirrors it holds.

// Config is the node's configuration, with the defaults New filled in.
func (n *Node) Config() Config { return n.cfg }

// Git is the node's git: every process bounded by the timeout and limits.
func (n *Node) Git() *gitcmd.Runner { return n.git }

// Dialer is the egress policy's dialer, which every connection to an
// upstream goes through.
func (n *Node) Dialer() *egress.Dialer { return n.dialer }

// Mirror is the store of the node's mirrors.
func (n *Node) Mirror() *mirror.Store { return n.mirror }

// Store is the node's database (node.db in its data directory).
func (n *Node) Store() store.Store { return n.db }

// FetchLog is the log of the node's work (package fetchlog).
func (n *Node) FetchLog() *fetchlog.Log { return n.flog }

// ID is the node's ID, as the coordinator gave it (0: not registered).
func (n *Node) ID() uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.id
}

// Coordinator returns a client of the coordinator and a context that
// authenticates this node, or an error while the node is not registered.
func (n *Node) Coordinator(ctx context.Context) (fleetv1.CoordinatorClient, context.Context, error) {
	n.mu.Lock()
	client, id, secret := n.client, n.id, n.secret
	n.mu.Unlock()
	if client == nil || id == 0 {
		return nil, nil, errors.New("the full node is not connected to its coordinator yet")
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "x-gitfleet-node", fmt.Sprint(id), "x-gitfleet-secret", secret)
	return client, ctx, nil
}

// Session tells whether the node is in session with the coordinator, and
// whether a coordinator said last that it knows no leader.
func (n *Node) Session() (open, leaderless bool) {
	n.mu.Lock()
	open = n.sess != nil
	n.mu.Unlock()
	return open, n.leaderless.Load()
}

// CountFetched returns the counter of bytes git receives from source
// (gitfleet_fetched_bytes_total).
func (n *Node) CountFetched(source string) func(int) { return n.met.addFetched(source) }

// CountServed returns the counter of bytes of git answers served to to
// (gitfleet_served_bytes_total).
func (n *Node) CountServed(to string) func(int) { return n.met.addServed(to) }

// NextCheck is when the node's scheduler may next check key, which the
// node owns; false when it does not schedule key.
func (n *Node) NextCheck(key repokey.Key) (time.Time, bool) { return n.sched.Due(key) }

// BrokenState is key's state while its mirror is not served
// (repostate.Corrupt, Repairing, Unchecked); false when it is whole.
func (n *Node) BrokenState(key repokey.Key) (repostate.State, bool) {
	return n.integrity.brokenState(key)
}

// Reschedule puts keys, assigned here, back in the scheduler after they
// waited out of it (for disk room: the role's AdmitOwn), and wakes the
// fetchers.
func (n *Node) Reschedule(keys ...repokey.Key) {
	for _, k := range keys {
		n.addToSchedule(k, k.Host())
	}
	n.kick()
}

// ServeFailed hears of a failed upload-pack of key (to the public, or to
// a full node): one that failed on the mirror's objects has its integrity
// checked at once.
func (n *Node) ServeFailed(key string, err error) {
	if gitcmd.ClassOf(err) != gitcmd.ClassBadObjects {
		return
	}
	// gitserve tells the key as written; a rare path, parsed here.
	if k, perr := repokey.Parse(key); perr == nil {
		n.checkIntegritySoon(k, "a clone")
	}
}

// SetTunnelCache has the git answers served through the tunnels share c,
// a full node's pack cache: a clone relayed from another full node then
// costs the holder what one from the public does. Call it before Run.
func (n *Node) SetTunnelCache(c *gitserve.PackCache) { n.packs = c }

// SetTunnelReads has the tunnels answer what is not git with h: a full
// node's per-repository reads that another full node relays to it (package
// fullnode). A partial node sets none: its tunnels serve git only. Call it
// before Run.
func (n *Node) SetTunnelReads(h http.Handler) { n.reads = h }

// tunnelHandler serves the node's own mirrors to full nodes through the
// tunnels it opens to them (counted as served, and as today's uploads),
// and what SetTunnelReads gave for the rest.
func (n *Node) tunnelHandler() http.Handler {
	served := n.met.addServed("full-node")
	git := metrics.CountBytes(&gitserve.Handler{Git: n.git, Log: n.log, OnFailure: n.ServeFailed, Cache: n.packs,
		Resolve: func(key repokey.Key) (string, bool) {
			if !n.mirror.Has(key) {
				return "", false
			}
			if _, broken := n.integrity.brokenState(key); broken {
				return "", false
			}
			return n.mirror.Path(key), true
		}}, func(b int) { served(b); n.traffic.add(true, b) })
	if n.reads == nil {
		return git
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := gitserve.Match(r.URL.Path); ok {
			git.ServeHTTP(w, r)
			return
		}
		n.reads.ServeHTTP(w, r)
	})
}
