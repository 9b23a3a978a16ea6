package node

import (
	"context"
	"time"

	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Role is what a node's role adds to the runtime. A partial node (a
// volunteer's machine) runs the runtime alone, with the partial role
// below; a full node (package fullnode) adds the aggregator: it registers
// as a full node, serves the public, pulls every repository from its
// owner, and hears through these hooks of what the runtime does. The
// hooks are called without the node's locks held. Start and Serve aside,
// they return soon: Handle runs on the session's receiving goroutine, and
// the role runs what waits on the network in goroutines of its own, which
// Serve waits for.
type Role interface {
	// Registration is what the node tells the coordinator of its role
	// when it registers. Its addresses are known once Start has run.
	Registration() Registration
	// Start prepares the role before the node's loops start: its stored
	// state, and its listeners, so that a port that is taken fails the
	// start at once.
	Start(ctx context.Context) error
	// Serve runs the role beside the node's loops until ctx ends. The
	// node waits for it, and Serve for whatever work it started, before
	// the node closes its store. An error stops the node.
	Serve(ctx context.Context) error
	// Handle takes the coordinator's messages that the runtime does not
	// act on (the fleet's repository states and removals, tasks done,
	// node credentials, change hints) and the feeds' status, which the
	// runtime has applied to its scheduler first. ctx ends with the
	// session.
	Handle(ctx context.Context, msg *fleetv1.CoordinatorMessage)
	// Assigned hears that key was assigned to this node, before any check
	// of it.
	Assigned(key repokey.Key)
	// AdmitOwn decides by the disk whether a check of key (assigned here,
	// due now; held: its mirror is on disk) may start. When it may,
	// release ends the room reserved for it. When it may not, AdmitOwn
	// has done what the refusal asks (the key leaves the scheduler).
	AdmitOwn(key repokey.Key, held bool) (release func(), ok bool)
	// Fetched hears of a check of key, started at start, that brought its
	// mirror to what the upstream had (res).
	Fetched(key repokey.Key, start time.Time, res mirror.Result)
	// Changed hears that what the node holds of key changed: its digest,
	// or whether its mirror may be served (broken, repaired).
	Changed(key repokey.Key)
	// Repaired hears that key's mirror was copied again from its upstream,
	// whose refs have the digest digest.
	Repaired(key repokey.Key, digest string)
	// Upstream is key's upstream URL as the role knows it, for a
	// repository that the node does not fetch itself ("": unknown).
	Upstream(key repokey.Key) string
	// DiskBeside is what the role keeps on the node's disk besides the
	// mirrors, in bytes, counted with them against --disk-quota.
	DiskBeside() int64
}

// Registration is what a node tells the coordinator of its role.
type Registration struct {
	Mode      fleetv1.Mode
	FullToken string // admits a full node (the coordinator's --full-token)
	// TunnelAddr is where partial nodes open tunnels to this node ("":
	// none); the node opens none to itself.
	TunnelAddr string
	PublicURL  string // where this node serves git to others ("": nowhere)
	// HoldsAll: the node keeps a copy of every repository of the fleet.
	// A repository it no longer fetches keeps its mirror, and one
	// assigned to it is never cloned from another node's copy first.
	HoldsAll bool
}

// roleName names a mode in logs and metrics.
func roleName(m fleetv1.Mode) string {
	if m == fleetv1.Mode_MODE_FULL {
		return "full"
	}
	return "partial"
}

// partial is the role of a partial node: the runtime alone. Its one
// decision of its own is the disk's: a mirror that would take the disk
// over its high water is handed back to the coordinator.
type partial struct{ n *Node }

func (partial) Registration() Registration { return Registration{Mode: fleetv1.Mode_MODE_PARTIAL} }

func (partial) Start(context.Context) error { return nil }

func (partial) Serve(context.Context) error { return nil }

func (partial) Handle(context.Context, *fleetv1.CoordinatorMessage) {}

func (partial) Assigned(repokey.Key) {}

// AdmitOwn lets a check of a held mirror start; a first clone only with
// room for one more mirror. Without room, the key is handed back to the
// coordinator rather than fill the disk.
func (p partial) AdmitOwn(k repokey.Key, held bool) (func(), bool) {
	key := k.String() // the books of what is owned hold the key as written
	n := p.n
	if held {
		return func() {}, true
	}
	if release, ok := n.ReserveClone(); ok {
		return release, true
	}
	n.log.Warn("disk full: handing the repository back to the coordinator", "key", key)
	n.mu.Lock()
	delete(n.owned, key)
	n.handBack = append(n.handBack, key)
	n.mu.Unlock()
	n.Unschedule(k)
	n.sendSoon()
	return nil, false
}

func (partial) Fetched(repokey.Key, time.Time, mirror.Result) {}

func (partial) Changed(repokey.Key) {}

func (partial) Repaired(repokey.Key, string) {}

func (partial) Upstream(repokey.Key) string { return "" }

func (partial) DiskBeside() int64 { return 0 }
