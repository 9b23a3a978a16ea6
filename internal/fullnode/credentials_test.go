package fullnode

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// tunnelProof is node id's tunnel proof, as a partial node derives it from
// its secret (package node).
func tunnelProof(secret string, id uint32) string {
	return fleetv1.TunnelProof(fleetv1.SecretHash(secret), id)
}

func TestTunnelCredentials(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	c := newTunnelCreds(clk)
	hash := func(s string) string { return fleetv1.SecretHash(s) }
	cut := c.apply(&fleetv1.NodeCredentials{Replace: true, Nodes: []*fleetv1.NodeCredential{
		{NodeId: 1, SecretHash: hash("one")}, {NodeId: 2, SecretHash: hash("two")}}})
	if len(cut) != 0 {
		t.Errorf("a first list cut %v", cut)
	}
	for _, tt := range []struct {
		id     uint32
		secret string
		err    string
	}{
		{1, "one", ""},
		{2, "two", ""},
		{2, "one", "not node 2's"}, // node 1 posing as node 2
		{1, "two", "not node 1's"},
	} {
		err := c.authenticate(tt.id, tunnelProof(tt.secret, tt.id))
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("node %d with %q's proof: %v, want %q", tt.id, tt.secret, err, tt.err)
		}
	}
	// A proof is bound to its ID: node 1's proof does not open node 2.
	if err := c.authenticate(2, tunnelProof("one", 1)); err == nil {
		t.Error("node 1's proof opened node 2's tunnel")
	}

	cut = c.apply(&fleetv1.NodeCredentials{Revoked: []uint32{2}})
	if len(cut) != 1 || cut[0] != 2 {
		t.Errorf("revoking node 2 cut %v", cut)
	}
	if err := c.authenticate(2, tunnelProof("two", 2)); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("revoked node 2: %v", err)
	}
	// A full list replaces what was known: node 1 is gone from it.
	cut = c.apply(&fleetv1.NodeCredentials{Replace: true, Nodes: []*fleetv1.NodeCredential{{NodeId: 3, SecretHash: hash("three")}}, Revoked: []uint32{2}})
	if !slices.Contains(cut, 1) {
		t.Errorf("a full list without node 1 cut %v", cut)
	}
}

func TestTunnelCredentialsWaitForANewNode(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	c := newTunnelCreds(clk)
	done := make(chan error, 1)
	go func() { done <- c.authenticate(5, tunnelProof("five", 5)) }()
	// The node's credential arrives after its tunnel did.
	c.apply(&fleetv1.NodeCredentials{Nodes: []*fleetv1.NodeCredential{{NodeId: 4, SecretHash: fleetv1.SecretHash("four")}}})
	c.apply(&fleetv1.NodeCredentials{Nodes: []*fleetv1.NodeCredential{{NodeId: 5, SecretHash: fleetv1.SecretHash("five")}}})
	if err := <-done; err != nil {
		t.Fatalf("a tunnel that came before its credential: %v", err)
	}

	// A node that stays unknown is refused once the wait is over (the
	// clock moves until the waiting callback has seen it move).
	go func() { done <- c.authenticate(6, tunnelProof("six", 6)) }()
	for {
		clk.Advance(credentialWait)
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not known") {
				t.Fatalf("an unknown node: %v", err)
			}
			return
		case <-time.After(time.Millisecond):
		}
	}
}
