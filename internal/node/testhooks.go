package node

import (
	"context"
	"net/http"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// TestHooks reach into a node for the tests of the role built on it
// (package fullnode), which set up without a coordinator what a session
// and the node's loops otherwise bring. Nothing else uses them.
type TestHooks struct{ n *Node }

// TestHooks returns the node's test hooks.
func (n *Node) TestHooks() TestHooks { return TestHooks{n} }

// Hold records mirrors as held with their digests, as checks would,
// without the store (a million of them in a benchmark's setup).
func (h TestHooks) Hold(digests map[repokey.Key]string) {
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	for k, d := range digests {
		h.n.digests[k] = d
	}
}

// InSession marks the node in session with the coordinator, as a session
// open with no coordinator to ask.
func (h TestHooks) InSession() {
	h.n.mu.Lock()
	h.n.sess = &coordSession{}
	h.n.mu.Unlock()
}

// SetBroken sets key's broken state (repostate.Corrupt, Repairing), as the
// integrity scan and a repair do.
func (h TestHooks) SetBroken(key repokey.Key, state repostate.State) {
	h.n.integrity.setBroken(key, state)
}

// SetWhole serves key's mirror again, as a repair does.
func (h TestHooks) SetWhole(key repokey.Key) { h.n.integrity.setWhole(key) }

// Assign takes r as assigned by the coordinator.
func (h TestHooks) Assign(r *fleetv1.Repo) { h.n.assign(r) }

// Due returns the key the scheduler would check next, if one is due.
func (h TestHooks) Due() (repokey.Key, bool) {
	key, ok, _ := h.n.sched.Next()
	return key, ok
}

// Check runs a check of key, as a fetcher does once it is due.
func (h TestHooks) Check(ctx context.Context, key repokey.Key) { h.n.check(ctx, key) }

// Result returns the result of key's check waiting to be sent.
func (h TestHooks) Result(key string) (*fleetv1.CheckResult, bool) {
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	r, ok := h.n.results[key]
	return r, ok
}

// Close closes the store and the egress proxy of a node that never ran
// (Run closes them at its end).
func (h TestHooks) Close() {
	h.n.db.Close()
	h.n.proxy.Close()
}

// Connect sets the coordinator client, node ID and secret that the node's
// calls to the coordinator use (Coordinator), as a session's registration
// does.
func (h TestHooks) Connect(client fleetv1.CoordinatorClient, id uint32, secret string) {
	h.n.mu.Lock()
	h.n.client, h.n.id, h.n.secret = client, id, secret
	h.n.mu.Unlock()
}

// TunnelHandler is what the node serves through the tunnels it opens to
// full nodes, as a session's tunnels serve it.
func (h TestHooks) TunnelHandler() http.Handler { return h.n.tunnelHandler() }
