package coordinator

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/etcdtest"
	"github.com/gitfleet/gitfleet/internal/ha"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A revocation is kept in the etcd store as in bbolt: the next leader
// refuses the node too, and does not give its ID away.
func TestRevocationIsKeptInTheEtcdStore(t *testing.T) {
	etcd := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := ha.Dial(ctx, []string{etcd.Endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	// lead wins a term and starts its coordinator; end closes it and
	// resigns.
	lead := func() (c *Coordinator, end func()) {
		term, err := ha.NewElector(client, "/roles-test", 10*time.Second, "a:7070").Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		c, err = New(ctx, Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), JoinToken: testJoin, FullToken: testFull,
			Store: term.Store()}, slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1.7e9, 0)))
		if err != nil {
			t.Fatal(err)
		}
		return c, func() { c.Close(); _ = term.Resign(ctx) }
	}
	c, end := lead()
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull})
	bad := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin})
	if _, err := c.RevokeNode(as(full), &fleetv1.RevokeNodeRequest{NodeId: bad.GetNodeId(), Reason: "forged history"}); err != nil {
		t.Fatal(err)
	}
	end()

	c, end = lead() // the next term, on another machine's empty disk
	defer end()
	_, err = register(t, c, &fleetv1.RegisterRequest{NodeId: bad.GetNodeId(), NodeSecret: bad.GetNodeSecret(), JoinToken: testJoin})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the revoked node at the next leader: %v", err)
	}
	if fresh := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin}); fresh.GetNodeId() == bad.GetNodeId() {
		t.Fatalf("the next leader gave the revoked node's ID %d away", bad.GetNodeId())
	}
}
