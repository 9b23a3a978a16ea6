package coordinator

import (
	"cmp"
	"context"
	"crypto/subtle"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"

	"github.com/gitfleet/gitfleet/internal/membership"
)

// Roles are granted, never claimed: the join token admits new partial
// nodes, the full token full nodes (at every registration), and a known
// node comes back with its own ID and secret, so that the join token can be
// rotated under it. Full nodes learn the hash of every node's secret, from
// which tunnel proofs are derived, and which nodes were revoked.

// maxReasonLen bounds the reason of a revocation.
const maxReasonLen = 512

// splitTokens parses a comma-separated list of join tokens.
func splitTokens(list string) []string {
	var out []string
	for t := range strings.SplitSeq(list, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// tokenIn reports whether t is one of tokens, comparing each in constant
// time (every token is compared, so the time does not say which matched).
func tokenIn(t string, tokens []string) bool {
	ok := 0
	for _, want := range tokens {
		ok |= subtle.ConstantTimeCompare([]byte(t), []byte(want))
	}
	return ok == 1
}

// secretMatches compares a presented secret with a record's hash.
func secretMatches(rec *nodeRecord, secret string) bool {
	return rec != nil && subtle.ConstantTimeCompare([]byte(rec.SecretHash), []byte(fleetv1.SecretHash(secret))) == 1
}

// full reports whether the node was admitted as a full node with the full
// token and is not revoked.
func (n *nodeRecord) full() bool {
	return n.Mode == fleetv1.Mode_MODE_FULL && n.FullGranted && !n.Revoked
}

// revokedError is what a revoked node is told.
func revokedError(rec *nodeRecord) error { return fleetv1.RevokedError(rec.ID, rec.RevokedReason) }

// admit decides whether a registration is admitted. known is the record
// that the request's ID and secret prove (nil: a new node, or a wrong
// secret). It returns a gRPC status error that says what to set.
func admit(req *fleetv1.RegisterRequest, known *nodeRecord, joinTokens []string, fullToken string) error {
	if known != nil && known.Revoked {
		return revokedError(known)
	}
	if req.GetMode() == fleetv1.Mode_MODE_FULL {
		if fullToken == "" {
			return status.Error(codes.PermissionDenied, "this coordinator admits no full nodes: start it with --full-token (env GITFLEET_FULL_TOKEN) and give each full node the same")
		}
		if subtle.ConstantTimeCompare([]byte(req.GetFullToken()), []byte(fullToken)) != 1 {
			return status.Error(codes.PermissionDenied, "full token refused: a full node needs the coordinator's --full-token (env GITFLEET_FULL_TOKEN); the join token admits partial nodes only")
		}
		return nil
	}
	if known != nil || tokenIn(req.GetJoinToken(), joinTokens) {
		return nil
	}
	return status.Error(codes.PermissionDenied, "join token refused: check --join-token against the coordinator's")
}

// queueCredentials queues to every full node's session what became of
// node id's credential: registered, revoked or forgotten. Caller holds c.mu.
func (c *Coordinator) queueCredentials(id uint32) {
	for _, s := range c.fullSessions() {
		s.creds[id] = true
		s.kick()
	}
}

// credentials builds the session's pending NodeCredentials message, or
// nil. Caller holds c.mu.
func (s *session) credentials() *fleetv1.NodeCredentials {
	if !s.full || !s.credsAll && len(s.creds) == 0 {
		return nil
	}
	m := &fleetv1.NodeCredentials{Replace: s.credsAll}
	add := func(id uint32) {
		rec := s.c.nodes[id]
		switch {
		case rec == nil:
			m.Forgotten = append(m.Forgotten, id)
		case rec.Revoked:
			m.Revoked = append(m.Revoked, id)
		default:
			m.Nodes = append(m.Nodes, &fleetv1.NodeCredential{NodeId: id, SecretHash: rec.SecretHash})
		}
	}
	if s.credsAll {
		for id := range s.c.nodes {
			add(id)
		}
	} else {
		for id := range s.creds {
			add(id)
		}
	}
	slices.SortFunc(m.Nodes, func(a, b *fleetv1.NodeCredential) int { return cmp.Compare(a.NodeId, b.NodeId) })
	slices.Sort(m.Revoked)
	slices.Sort(m.Forgotten)
	s.credsAll = false
	clear(s.creds)
	return m
}

// RevokeNode bans a node for good (full nodes only).
func (c *Coordinator) RevokeNode(ctx context.Context, req *fleetv1.RevokeNodeRequest) (*fleetv1.RevokeNodeResponse, error) {
	by, err := c.authFull(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.GetReason()) > maxReasonLen {
		return nil, status.Errorf(codes.InvalidArgument, "reason longer than %d bytes", maxReasonLen)
	}
	if req.GetNodeId() == by {
		return nil, status.Error(codes.InvalidArgument, "a full node cannot revoke itself: ask another full node, or stop it")
	}
	if err := c.revoke(ctx, req.GetNodeId(), req.GetReason()); err != nil {
		return nil, err
	}
	c.log.Warn("node revoked", "node", req.GetNodeId(), "reason", req.GetReason(), "by", by)
	return &fleetv1.RevokeNodeResponse{}, nil
}

// revoke marks node id revoked (stored first), cuts its session, takes it
// out of membership so that its repositories are re-placed at once, and
// tells the full nodes, which close its tunnels. Revoking a revoked node
// changes nothing.
func (c *Coordinator) revoke(ctx context.Context, id uint32, reason string) error {
	if reason == "" {
		reason = membership.DefaultRevokeReason
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.nodes[id]
	if rec == nil {
		return status.Error(codes.NotFound, membership.NotInFleet(id))
	}
	if rec.Revoked {
		return nil
	}
	wasFull := rec.full()
	next := *rec
	next.Revoked, next.RevokedReason, next.RevokedAtMs, next.FullGranted = true, reason, c.clk.Now().UnixMilli(), false
	if err := c.saveNode(ctx, &next); err != nil {
		return status.Errorf(codes.Unavailable, "store the revocation of node %d: %v", id, err)
	}
	*rec = next
	if s := c.sessions[id]; s != nil {
		delete(c.sessions, id)
		s.revoked = reason
		s.cancel()
	}
	delete(c.tierDropsAway, id)
	c.applyChanges(c.table.Forget(id, c.clk.Now()))
	c.queueCredentials(id)
	if wasFull {
		for _, s := range c.sessions {
			s.queueWelcome() // its tunnel address is gone
		}
	}
	return nil
}

// revokedNodes describes the revoked nodes for ListNodes. Caller holds c.mu.
func (c *Coordinator) revokedNodes() []*fleetv1.NodeInfo {
	var out []*fleetv1.NodeInfo
	for _, rec := range c.nodes {
		if rec.Revoked {
			out = append(out, &fleetv1.NodeInfo{Id: rec.ID, Name: rec.Name, Mode: rec.Mode, State: "revoked",
				Capacity: rec.Capacity, RevokedReason: rec.RevokedReason, RevokedAtMs: rec.RevokedAtMs})
		}
	}
	slices.SortFunc(out, func(a, b *fleetv1.NodeInfo) int { return cmp.Compare(a.Id, b.Id) })
	return out
}

// endError is the error a session ends with when the coordinator cut it
// (nil: it did not). Caller holds c.mu.
func (s *session) endError() error {
	if s.revoked != "" {
		return fleetv1.RevokedError(s.id, s.revoked)
	}
	return nil
}
