package fullnode

import (
	"context"
	"crypto/hmac"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// credentialWait is how long a tunnel from a node this full node has no
// credential for yet waits for the coordinator to send it: a node that
// has just registered can dial before its credential arrives.
const credentialWait = 5 * time.Second

// tunnelCreds is what a full node knows of the fleet's node credentials
// (from the coordinator's NodeCredentials): the hash of each node's
// secret, from which its tunnel proof is derived, and the revoked nodes.
// It is safe for concurrent use.
type tunnelCreds struct {
	clk clock.Clock

	mu      sync.Mutex
	hashes  map[uint32]string
	revoked map[uint32]bool
	changed chan struct{} // closed and replaced at each update
}

func newTunnelCreds(clk clock.Clock) *tunnelCreds {
	return &tunnelCreds{clk: clk, hashes: map[uint32]string{}, revoked: map[uint32]bool{}, changed: make(chan struct{})}
}

// apply takes in a NodeCredentials message and returns the nodes whose
// tunnels must be closed: revoked, forgotten, or with another secret.
func (c *tunnelCreds) apply(m *fleetv1.NodeCredentials) (cut []uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.hashes
	if m.GetReplace() {
		c.hashes = map[uint32]string{}
	} else {
		old = nil
	}
	for _, nc := range m.GetNodes() {
		id := nc.GetNodeId()
		if h, ok := c.hashes[id]; ok && h != nc.GetSecretHash() {
			cut = append(cut, id)
		}
		c.hashes[id] = nc.GetSecretHash()
		delete(c.revoked, id)
	}
	for id, h := range old { // a full list: those it no longer has, or with another hash
		if c.hashes[id] != h {
			cut = append(cut, id)
		}
	}
	for _, id := range m.GetRevoked() {
		delete(c.hashes, id)
		c.revoked[id] = true
		cut = append(cut, id)
	}
	for _, id := range m.GetForgotten() {
		delete(c.hashes, id)
		cut = append(cut, id)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return cut
}

// check returns nil when proof is node id's tunnel proof; known says
// whether the answer is final (the node is known or revoked), and changed
// is closed at the next update.
func (c *tunnelCreds) check(id uint32, proof string) (known bool, changed <-chan struct{}, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.revoked[id] {
		return true, c.changed, fmt.Errorf("node %d was revoked", id)
	}
	h, ok := c.hashes[id]
	if !ok {
		return false, c.changed, fmt.Errorf("node %d is not known to this full node's coordinator", id)
	}
	if !hmac.Equal([]byte(proof), []byte(fleetv1.TunnelProof(h, id))) {
		return true, c.changed, fmt.Errorf("tunnel proof refused: it is not node %d's", id)
	}
	return true, c.changed, nil
}

// authenticate is the tunnel server's callback: a tunnel for node id is
// admitted only with node id's own proof. A node not known yet is given
// until credentialWait for its credential to arrive.
func (c *tunnelCreds) authenticate(id uint32, proof string) error {
	deadline := c.clk.After(credentialWait)
	for {
		known, changed, err := c.check(id, proof)
		if known {
			return err
		}
		select {
		case <-changed:
		case <-deadline:
			return err
		}
	}
}

// nodeCredentials applies the coordinator's NodeCredentials and closes
// the tunnels of the nodes it cut off.
func (f *Node) nodeCredentials(m *fleetv1.NodeCredentials) {
	for _, id := range f.creds.apply(m) {
		if f.tunnels.Disconnect(id) {
			f.log.Warn("tunnel closed: the node's credential was revoked or replaced", "node", id)
		}
	}
}

// RevokeNode asks the coordinator to revoke node id: its session and
// tunnels are cut, its repositories re-placed, its credential refused from
// then on. The operator's API calls it, and so can the full node's own
// checks (a node that serves what the upstream does not have).
func (b *backend) RevokeNode(ctx context.Context, id uint32, reason string) error {
	client, cctx, err := b.coordinator(ctx)
	if err != nil {
		return err
	}
	if _, err := client.RevokeNode(cctx, &fleetv1.RevokeNodeRequest{NodeId: id, Reason: reason}); err != nil {
		switch status.Code(err) {
		case codes.NotFound:
			return fmt.Errorf("node %d: %w", id, api.ErrNotFound)
		case codes.InvalidArgument:
			return fmt.Errorf("%w: %s", api.ErrRefused, status.Convert(err).Message())
		}
		return fmt.Errorf("coordinator: revoke node %d: %s", id, status.Convert(err).Message())
	}
	return nil
}
