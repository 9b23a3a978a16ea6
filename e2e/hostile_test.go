package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/gitfleet/gitfleet/internal/tunnel"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// hostile is a volunteer that speaks the fleet's protocols itself, as a
// careless or malicious one could: it registers with whatever it likes,
// calls the coordinator's RPCs, keeps a session, and opens tunnels to the
// full node under any ID with any proof.
type hostile struct {
	t      testing.TB
	client fleetv1.CoordinatorClient
	// ID and Secret are the identity the coordinator gave it (0: none).
	ID     uint32
	Secret string
}

func newHostile(t testing.TB, coordinator string) *hostile {
	t.Helper()
	conn, err := grpc.NewClient(coordinator, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &hostile{t: t, client: fleetv1.NewCoordinatorClient(conn)}
}

// register sends req as it is; on success the hostile keeps the identity.
func (h *hostile) register(req *fleetv1.RegisterRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := h.client.Register(ctx, req)
	if err != nil {
		return err
	}
	h.ID = resp.GetNodeId()
	if resp.GetNodeSecret() != "" {
		h.Secret = resp.GetNodeSecret()
	}
	return nil
}

// join registers as a new partial node with joinToken.
func (h *hostile) join(joinToken string) {
	h.t.Helper()
	if err := h.register(&fleetv1.RegisterRequest{JoinToken: joinToken, Mode: fleetv1.Mode_MODE_PARTIAL, Name: "hostile", Capacity: 1}); err != nil {
		h.t.Fatalf("hostile: register as a partial node: %v", err)
	}
}

// as returns a context whose calls carry the hostile's credentials, as
// the full node's calls carry its own.
func (h *hostile) as() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	return metadata.AppendToOutgoingContext(ctx, "x-gitfleet-node", strconv.FormatUint(uint64(h.ID), 10), "x-gitfleet-secret", h.Secret), cancel
}

// hostileSession is a session the hostile keeps open: it sends heartbeats
// and records what the coordinator sends until the stream ends.
type hostileSession struct {
	mu     sync.Mutex
	assign []string
	ended  chan struct{}
	err    error // why it ended; read after ended is closed
	at     time.Time
}

// session opens a session (Hello with the hostile's identity), and keeps
// it alive with heartbeats until the coordinator ends it or ctx does.
func (h *hostile) session(ctx context.Context) (*hostileSession, error) {
	stream, err := h.client.Session(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Hello{Hello: &fleetv1.Hello{NodeId: h.ID, NodeSecret: h.Secret}}}); err != nil {
		return nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, err // refused
	}
	s := &hostileSession{ended: make(chan struct{})}
	s.record(first)
	go func() {
		for {
			select {
			case <-s.ended:
				return
			case <-time.After(300 * time.Millisecond):
			}
			_ = stream.Send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Heartbeat{Heartbeat: &fleetv1.Heartbeat{}}})
		}
	}()
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				s.err, s.at = err, time.Now()
				close(s.ended)
				return
			}
			s.record(msg)
		}
	}()
	return s, nil
}

func (s *hostileSession) record(m *fleetv1.CoordinatorMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range m.GetAssign().GetRepos() {
		s.assign = append(s.assign, r.GetKey())
	}
}

// assigned is how many repositories the coordinator gave the hostile.
func (s *hostileSession) assigned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.assign)
}

// hostileTunnel is a tunnel client the hostile runs, with the given ID
// and proof, through the fleet's own tunnel code; log says what happened
// to it (tunnel up, refused, down).
type hostileTunnel struct {
	log  *lockedBuffer
	stop context.CancelFunc
}

// tunnel keeps a tunnel to the full node at addr as node id with proof,
// serving h, until the test ends.
func (h *hostile) tunnel(addr string, id uint32, proof string, handler http.Handler) *hostileTunnel {
	ctx, cancel := context.WithCancel(context.Background())
	log := &lockedBuffer{}
	cfg := tunnel.ClientConfig{Addr: addr, NodeID: id, Proof: proof, Logger: slog.New(slog.NewTextHandler(log, nil)),
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	done := make(chan struct{})
	go func() { defer close(done); _ = tunnel.Serve(ctx, cfg, handler) }()
	h.t.Cleanup(func() { cancel(); <-done })
	return &hostileTunnel{log: log, stop: cancel}
}

// ownProof is the proof of node id as the hostile can make it: from its
// own secret.
func (h *hostile) ownProof(id uint32) string {
	return fleetv1.TunnelProof(fleetv1.SecretHash(h.Secret), id)
}

// lockedBuffer is a log sink that a test reads while a client writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// forged answers every request through a hostile's tunnel with nothing.
var forged = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "forged")
})

type apiNode struct {
	ID            uint32 `json:"id"`
	Name          string `json:"name"`
	Mode          string `json:"mode"`
	State         string `json:"state"`
	Repos         int    `json:"repos"`
	RevokedReason string `json:"revoked_reason"`
}

// apiNodes lists the fleet's nodes from the full node's API, by ID.
func apiNodes(base string) (map[uint32]apiNode, error) {
	resp, err := http.Get(base + "/api/v1/nodes")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /api/v1/nodes: %s: %s", resp.Status, b)
	}
	var body struct{ Nodes []apiNode }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	out := map[uint32]apiNode{}
	for _, n := range body.Nodes {
		out[n.ID] = n
	}
	return out, nil
}

// nodeID is the ID of the node named name, once the fleet lists it.
func (f *fleet) nodeID(name string) uint32 {
	f.t.Helper()
	var id uint32
	eventually(f.t, 30*time.Second, "node "+name+" is listed", func() error {
		nodes, err := apiNodes(f.base)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Name == name && n.State == "alive" {
				id = n.ID
				return nil
			}
		}
		return fmt.Errorf("%s not among %v", name, nodes)
	})
	return id
}
