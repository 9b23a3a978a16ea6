package fullnode

import (
	"context"
	"fmt"
	"github.com/gitfleet/gitfleet/internal/catalog"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// role is the full node as its runtime's role (node.Role): what it adds
// to the runtime, and what it hears of it. (The hooks are its own type's,
// so that they are not the full node's exported methods.)
type role struct{ *Node }

var _ node.Role = role{}

// Registration registers as a full node, with its tunnel and public URL
// once Start has opened their listeners.
func (f role) Registration() node.Registration {
	r := node.Registration{Mode: fleetv1.Mode_MODE_FULL, FullToken: f.cfg.FullToken, HoldsAll: true}
	if f.httpLn != nil {
		r.TunnelAddr, r.PublicURL = f.tunnelAdvertise(), f.publicURL()
	}
	return r
}

// Start reads the stored verified_at and the console's series, and opens
// the listeners.
func (f role) Start(ctx context.Context) error {
	if err := f.loadVerified(ctx); err != nil {
		return err
	}
	if err := f.loadSeries(ctx); err != nil {
		return fmt.Errorf("full node: read the console's series: %w", err)
	}
	return f.listen()
}

// Serve serves the public and runs the full node's loops (serve).
func (f role) Serve(ctx context.Context) error { return f.serve(ctx) }

// Handle takes the coordinator's messages for the full node.
func (f role) Handle(ctx context.Context, msg *fleetv1.CoordinatorMessage) {
	switch m := msg.Msg.(type) {
	case *fleetv1.CoordinatorMessage_RepoStates:
		f.states(m.RepoStates.GetRepos())
	case *fleetv1.CoordinatorMessage_RepoRemoved:
		f.removed(ctx, m.RepoRemoved.GetKeys())
	case *fleetv1.CoordinatorMessage_TaskDone:
		// Finishing a task may pull from the owner: not on the session's
		// receiving goroutine, and owned (serve waits for it).
		if !f.work.Go(func() { f.backend.taskDone(ctx, m.TaskDone) }) {
			f.log.Debug("task done while the full node stops: left running", "task", m.TaskDone.GetTaskId())
		}
	case *fleetv1.CoordinatorMessage_TierDrop:
		// A drop asks a peer first (peer.go): not on the session's
		// receiving goroutine.
		if !f.work.Go(func() { f.tierDropped(ctx, m.TierDrop.GetKeys()) }) {
			f.log.Debug("tier drop while the full node stops: left for the next", "keys", len(m.TierDrop.GetKeys()))
		}
	case *fleetv1.CoordinatorMessage_NodeCredentials:
		f.nodeCredentials(m.NodeCredentials)
	case *fleetv1.CoordinatorMessage_ChangeHint:
		f.hintFromFeed(ctx, m.ChangeHint)
	case *fleetv1.CoordinatorMessage_FeedStatus:
		f.setFeeds(m.FeedStatus)
	}
}

// Assigned brings back a removed repository's kept data before a check
// could clone it anew (retain.go).
func (f role) Assigned(key repokey.Key) { f.unretire(key) }

// AdmitOwn lets a check of a repository the full node owns start by its
// full-disk policy (fulldisk.go); refused, the repository waits for room
// out of the scheduler.
func (f role) AdmitOwn(key repokey.Key, held bool) (func(), bool) {
	if release, ok := f.gate(held); ok {
		return release, true
	}
	f.n.Unschedule(key) // before it waits: room may come at once
	f.waitOwn(key)
	return nil, false
}

// Fetched: what the full node fetched itself, as the owner, is the
// upstream's refs as of the check's start, and is served.
func (f role) Fetched(key repokey.Key, start time.Time, res mirror.Result) {
	f.ownSynced(key, start)
	f.served(key, res)
}

// Changed reclasses key (classes.go).
func (f role) Changed(key repokey.Key) { f.reclass(key) }

// Repaired pulls the owner's copy when it differs from the repaired one
// (retain.go).
func (f role) Repaired(key repokey.Key, digest string) { f.repaired(key, digest) }

// Network is key's fork network as the coordinator states it
// (RepoState.network): the full node keeps one object pool per network.
func (f role) Network(key repokey.Key) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.view.Entry(key); ok {
		return v.Network()
	}
	return ""
}

// Archives tells whether key's catalog entry asks for the archive of
// rewritten history (catalog.AttrArchive), as the coordinator sent it.
func (f role) Archives(key repokey.Key) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.view.Entry(key); ok {
		return catalog.Archives(v.Attrs())
	}
	return false
}

// Upstream is key's upstream URL as the coordinator sent it.
func (f role) Upstream(key repokey.Key) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.view.Entry(key); ok {
		return v.Upstream(key)
	}
	return ""
}

// DiskBeside is the size of the pack cache's files.
func (f role) DiskBeside() int64 {
	if f.packs == nil {
		return 0
	}
	return f.packs.Stats().Bytes
}

// work runs the goroutines that the coordinator's messages start (a
// task's end may pull): Serve waits for them before it returns, so that
// none outlives the store, and none starts once it stopped.
type work struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// Go runs fn in a goroutine, unless the work stopped; it reports whether
// it did.
func (w *work) Go(fn func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	w.wg.Go(fn)
	return true
}

// stop refuses new work and waits for what runs.
func (w *work) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.wg.Wait()
}
