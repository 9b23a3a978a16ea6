package coordinator

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/clock"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

const (
	testJoin = "join-secret"
	testFull = "full-secret"
)

func TestAdmit(t *testing.T) {
	partial, full := fleetv1.Mode_MODE_PARTIAL, fleetv1.Mode_MODE_FULL
	known := &nodeRecord{ID: 3}
	revoked := &nodeRecord{ID: 4, Revoked: true, RevokedReason: "forged history"}
	joins := []string{"old", "new"}
	for _, tt := range []struct {
		name      string
		req       *fleetv1.RegisterRequest
		known     *nodeRecord
		fullToken string
		err       string // "" admitted
	}{
		{"a new partial node with the join token", &fleetv1.RegisterRequest{Mode: partial, JoinToken: "new"}, nil, testFull, ""},
		{"a new partial node with the other join token of the list", &fleetv1.RegisterRequest{Mode: partial, JoinToken: "old"}, nil, testFull, ""},
		{"a new partial node with a wrong join token", &fleetv1.RegisterRequest{Mode: partial, JoinToken: "nope"}, nil, testFull, "join token refused"},
		{"a new partial node with the full token as join token", &fleetv1.RegisterRequest{Mode: partial, JoinToken: testFull}, nil, testFull, "join token refused"},
		{"a known partial node without the join token", &fleetv1.RegisterRequest{Mode: partial}, known, testFull, ""},
		{"a full node with the join token only", &fleetv1.RegisterRequest{Mode: full, JoinToken: "new"}, nil, testFull, "full token refused"},
		{"a full node with the join token as full token", &fleetv1.RegisterRequest{Mode: full, FullToken: "new"}, nil, testFull, "full token refused"},
		{"a full node with the full token", &fleetv1.RegisterRequest{Mode: full, FullToken: testFull}, nil, testFull, ""},
		{"a known node becoming full without the full token", &fleetv1.RegisterRequest{Mode: full}, known, testFull, "full token refused"},
		{"a full node at a coordinator with no full token", &fleetv1.RegisterRequest{Mode: full, FullToken: ""}, nil, "", "--full-token"},
		{"a revoked node with its secret", &fleetv1.RegisterRequest{Mode: partial, JoinToken: "new"}, revoked, testFull, "node 4 was revoked: forged history"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := admit(tt.req, tt.known, joins, tt.fullToken)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("got %v, want PermissionDenied saying %q", err, tt.err)
			}
		})
	}
}

// newTestCoordinator opens a coordinator on dir (a restart when dir has
// state). Its catalog is an empty path: nothing is fetched.
func newTestCoordinator(t *testing.T, dir, joinTokens, fullToken string) *Coordinator {
	t.Helper()
	c, err := New(context.Background(), Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), JoinToken: joinTokens,
		FullToken: fullToken}, slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1.7e9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func register(t *testing.T, c *Coordinator, req *fleetv1.RegisterRequest) (*fleetv1.RegisterResponse, error) {
	t.Helper()
	if req.Mode == fleetv1.Mode_MODE_UNSPECIFIED {
		req.Mode = fleetv1.Mode_MODE_PARTIAL
	}
	return c.Register(context.Background(), req)
}

func mustRegister(t *testing.T, c *Coordinator, req *fleetv1.RegisterRequest) *fleetv1.RegisterResponse {
	t.Helper()
	resp, err := register(t, c, req)
	if err != nil {
		t.Fatalf("register %v: %v", req, err)
	}
	return resp
}

// as authenticates a call as the node of resp.
func as(resp *fleetv1.RegisterResponse) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(
		"x-gitfleet-node", strconv.FormatUint(uint64(resp.GetNodeId()), 10), "x-gitfleet-secret", resp.GetNodeSecret()))
}

// adminCalls calls every admin RPC as ctx and returns their errors by name.
func adminCalls(c *Coordinator, ctx context.Context) map[string]error {
	errs := map[string]error{}
	_, errs["AddRepo"] = c.AddRepo(ctx, &fleetv1.AddRepoRequest{Url: "https://example.org/a/b"})
	_, errs["RemoveRepo"] = c.RemoveRepo(ctx, &fleetv1.RemoveRepoRequest{Key: "example.org/a/b"})
	_, errs["FetchNow"] = c.FetchNow(ctx, &fleetv1.FetchNowRequest{Key: "example.org/a/b"})
	_, errs["ListNodes"] = c.ListNodes(ctx, &fleetv1.ListNodesRequest{})
	_, errs["ConfirmPurge"] = c.ConfirmPurge(ctx, &fleetv1.ConfirmPurgeRequest{})
	_, errs["CatalogStatus"] = c.CatalogStatus(ctx, &fleetv1.CatalogStatusRequest{})
	_, errs["RevokeNode"] = c.RevokeNode(ctx, &fleetv1.RevokeNodeRequest{NodeId: 1, Reason: "test"})
	_, errs["ReportStanding"] = c.ReportStanding(ctx, &fleetv1.ReportStandingRequest{NodeId: 1, Mismatches: 1})
	return errs
}

func TestAdminCallsNeedAFullNodeAdmittedWithTheFullToken(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	partial := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "volunteer"})
	for name, err := range adminCalls(c, as(partial)) {
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s as a partial node: %v, want PermissionDenied", name, err)
		}
	}
	wrong := &fleetv1.RegisterResponse{NodeId: full.GetNodeId(), NodeSecret: partial.GetNodeSecret()}
	for name, err := range adminCalls(c, as(wrong)) {
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s with the full node's ID and another secret: %v, want Unauthenticated", name, err)
		}
	}
	c.mu.Lock()
	repos := c.engine.Len()
	revoked := c.nodes[partial.GetNodeId()].Revoked
	c.mu.Unlock()
	if repos != 0 || revoked {
		t.Fatalf("refused calls changed the fleet: %d repositories, partial node revoked %v", repos, revoked)
	}
	// The full node may (the RevokeNode of node 1 is its own: refused as such).
	for name, err := range adminCalls(c, as(full)) {
		if status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
			t.Errorf("%s as the full node: %v", name, err)
		}
	}
}

func TestAFullRecordStoredBeforeFullTokensMustProveItAgain(t *testing.T) {
	dir := t.TempDir()
	c := newTestCoordinator(t, dir, testJoin, testFull)
	// A record as the coordinator stored it before full tokens existed:
	// mode full, no grant.
	secret := "old-secret"
	if err := c.saveNode(context.Background(), &nodeRecord{ID: 1, Name: "old-full", SecretHash: fleetv1.SecretHash(secret), Mode: fleetv1.Mode_MODE_FULL}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = newTestCoordinator(t, dir, testJoin, testFull)
	old := &fleetv1.RegisterResponse{NodeId: 1, NodeSecret: secret}
	if _, err := c.ListNodes(as(old), &fleetv1.ListNodesRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an old full record's admin call: %v, want PermissionDenied", err)
	}
	if _, err := register(t, c, &fleetv1.RegisterRequest{NodeId: 1, NodeSecret: secret, Mode: fleetv1.Mode_MODE_FULL, JoinToken: testJoin}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("re-registering as full without the full token: %v", err)
	}
	resp := mustRegister(t, c, &fleetv1.RegisterRequest{NodeId: 1, NodeSecret: secret, Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull})
	if resp.GetNodeId() != 1 {
		t.Fatalf("the old full node got ID %d, want 1", resp.GetNodeId())
	}
	if _, err := c.ListNodes(as(old), &fleetv1.ListNodesRequest{}); err != nil {
		t.Fatalf("admin call after proving the full token: %v", err)
	}
}

func TestJoinTokenRotation(t *testing.T) {
	dir := t.TempDir()
	c := newTestCoordinator(t, dir, "first", testFull)
	node := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: "first", Name: "volunteer"})
	c.Close()

	// An overlap: both tokens admit new nodes.
	c = newTestCoordinator(t, dir, "first, second", testFull)
	mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: "first"})
	mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: "second"})
	c.Close()

	c = newTestCoordinator(t, dir, "second", testFull)
	again := mustRegister(t, c, &fleetv1.RegisterRequest{NodeId: node.GetNodeId(), NodeSecret: node.GetNodeSecret(), JoinToken: "first"})
	if again.GetNodeId() != node.GetNodeId() || again.GetNodeSecret() != "" {
		t.Fatalf("the admitted node came back as %d (new secret %v), want %d", again.GetNodeId(), again.GetNodeSecret() != "", node.GetNodeId())
	}
	if _, err := register(t, c, &fleetv1.RegisterRequest{JoinToken: "first"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a new node with the old token: %v", err)
	}
	// A wrong secret is not a known node: it needs the current token.
	if _, err := register(t, c, &fleetv1.RegisterRequest{NodeId: node.GetNodeId(), NodeSecret: "guess", JoinToken: "first"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a guessed secret with the old token: %v", err)
	}
}

func TestRevokedNodeIsRefusedForGoodAndItsIDNeverReused(t *testing.T) {
	dir := t.TempDir()
	c := newTestCoordinator(t, dir, testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull})
	bad := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin})

	// The full node's session learns the credentials, then the revocation.
	c.mu.Lock()
	s := newSession(c, c.nodes[full.GetNodeId()], func() {})
	c.sessions[full.GetNodeId()] = s
	s.queueWelcome()
	creds := credentialsIn(s.next())
	c.mu.Unlock()
	if creds == nil || !creds.GetReplace() || len(creds.GetNodes()) != 2 || creds.GetNodes()[1].GetSecretHash() != fleetv1.SecretHash(bad.GetNodeSecret()) {
		t.Fatalf("the full node's first credentials: %v", creds)
	}

	if _, err := c.RevokeNode(as(full), &fleetv1.RevokeNodeRequest{NodeId: bad.GetNodeId(), Reason: "forged history"}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	creds = credentialsIn(s.next())
	c.mu.Unlock()
	if creds == nil || creds.GetReplace() || len(creds.GetRevoked()) != 1 || creds.GetRevoked()[0] != bad.GetNodeId() {
		t.Fatalf("the full node was told %v, want node %d revoked", creds, bad.GetNodeId())
	}
	if _, err := c.RevokeNode(as(full), &fleetv1.RevokeNodeRequest{NodeId: full.GetNodeId()}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a full node revoking itself: %v", err)
	}
	if _, err := c.RevokeNode(as(full), &fleetv1.RevokeNodeRequest{NodeId: 99}); status.Code(err) != codes.NotFound {
		t.Errorf("revoking an unknown node: %v", err)
	}
	c.Close()

	// After a restart too.
	c = newTestCoordinator(t, dir, testJoin, testFull)
	_, err := register(t, c, &fleetv1.RegisterRequest{NodeId: bad.GetNodeId(), NodeSecret: bad.GetNodeSecret(), JoinToken: testJoin})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "was revoked: forged history") {
		t.Fatalf("the revoked node registering: %v", err)
	}
	if _, err := c.ListNodes(as(bad), &fleetv1.ListNodesRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the revoked node's admin call: %v", err)
	}
	fresh := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin})
	if fresh.GetNodeId() == bad.GetNodeId() {
		t.Fatalf("the revoked node's ID %d was given to a new node", bad.GetNodeId())
	}
	list, err := c.ListNodes(as(full), &fleetv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var shown *fleetv1.NodeInfo
	for _, n := range list.GetNodes() {
		if n.GetId() == bad.GetNodeId() {
			shown = n
		}
	}
	if shown == nil || shown.GetState() != "revoked" || shown.GetRevokedReason() != "forged history" || shown.GetRevokedAtMs() == 0 {
		t.Fatalf("the node list shows the revoked node as %v", shown)
	}
}

func credentialsIn(msgs []*fleetv1.CoordinatorMessage) *fleetv1.NodeCredentials {
	for _, m := range msgs {
		if nc := m.GetNodeCredentials(); nc != nil {
			return nc
		}
	}
	return nil
}
