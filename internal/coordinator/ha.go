package coordinator

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/gitfleet/gitfleet/internal/backoff"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Elector is the leader election of several coordinators that share one
// fleet (package ha implements it over etcd).
type Elector interface {
	// Campaign blocks until this coordinator leads, or ctx ends.
	Campaign(ctx context.Context) (Term, error)
	// Leader is the advertised gRPC address of the leader, "" if none.
	Leader(ctx context.Context) (string, error)
}

// Term is one leadership.
type Term interface {
	// Store is the shared state, writable while the term lasts.
	Store() store.Store
	// Done is closed when the leadership is lost.
	Done() <-chan struct{}
	// Resign gives the leadership up.
	Resign(ctx context.Context) error
}

// ServeElected serves ln as one of several coordinators of a fleet: it
// runs the coordinator on the shared store while it leads, and answers
// every call with the leader's address while another one does. A lost
// leadership stops the coordinator (its nodes' sessions end, and they go
// to the new leader); the process then campaigns again, after a backoff on
// clk if the election failed. It returns when ctx ends, resigning if it
// leads.
func ServeElected(ctx context.Context, cfg Config, log *slog.Logger, clk clock.Clock, ln net.Listener, el Elector) error {
	cfg.met = newCoordMetrics(cfg.Metrics) // once: every term reports through it
	f := &front{el: el}
	srv := newServer(cfg)
	fleetv1.RegisterCoordinatorServer(srv, f)
	log.Info("coordinator listening as a candidate leader", "grpc", ln.Addr().String(), "tls", cfg.TLS != nil, "catalog", repokey.Redact(cfg.Catalog))
	var wg sync.WaitGroup
	wg.Go(func() {
		retry := backoff.New(clk, time.Second, 30*time.Second)
		for ctx.Err() == nil {
			term, err := el.Campaign(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				wait := retry.Failed()
				log.Warn("leader election failed; retrying", "err", err, "retry_in", wait)
				if retry.Wait(ctx, wait) != nil {
					return
				}
				continue
			}
			retry.Reset()
			f.lead(ctx, cfg, log, clk, term)
		}
	})
	err := serveUntil(ctx, srv, ln)
	wg.Wait()
	return err
}

// front is the gRPC service of a coordinator that may or may not lead: it
// hands each call to the running coordinator, or answers with the
// leader's address.
type front struct {
	fleetv1.UnimplementedCoordinatorServer
	el Elector

	mu   sync.Mutex
	c    *Coordinator
	term context.Context // ends with the leadership
}

// lead runs the coordinator for one term.
func (f *front) lead(ctx context.Context, cfg Config, log *slog.Logger, clk clock.Clock, term Term) {
	tctx, cancel := context.WithCancel(ctx)
	var watch sync.WaitGroup
	defer watch.Wait()
	defer cancel()
	watch.Go(func() {
		select {
		case <-term.Done():
			log.Error("leadership lost (etcd lease expired); stopping the coordinator")
			cancel()
		case <-tctx.Done():
		}
	})
	defer func() {
		if err := term.Resign(context.Background()); err != nil && ctx.Err() == nil {
			log.Warn("resigning the leadership", "err", err)
		}
	}()
	cfg.Store = term.Store()
	log.Info("elected leader: resuming the fleet from the shared state")
	c, err := New(tctx, cfg, log, clk)
	if err != nil {
		log.Error("elected, but the coordinator cannot start; resigning", "err", err)
		return
	}
	defer c.Close()
	f.mu.Lock()
	f.c, f.term = c, tctx
	f.mu.Unlock()
	if err := c.Run(tctx); err != nil {
		log.Error("term over: the latest changes were not stored; the next leader resumes without them", "err", err)
	}
	f.mu.Lock()
	f.c, f.term = nil, nil
	f.mu.Unlock()
}

// leader returns the running coordinator and the context of its term, or
// the error that sends the caller to the leader.
func (f *front) leader(ctx context.Context) (*Coordinator, context.Context, error) {
	f.mu.Lock()
	c, term := f.c, f.term
	f.mu.Unlock()
	if c != nil {
		return c, term, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addr, _ := f.el.Leader(lctx) // unknown: the caller tries its other addresses
	return nil, nil, fleetv1.NotLeaderError(addr)
}

// delegate calls fn on the leading coordinator.
func delegate[Req, Resp any](f *front, ctx context.Context, req Req, fn func(*Coordinator, context.Context, Req) (Resp, error)) (Resp, error) {
	c, _, err := f.leader(ctx)
	if err != nil {
		var zero Resp
		return zero, err
	}
	return fn(c, ctx, req)
}

func (f *front) Register(ctx context.Context, req *fleetv1.RegisterRequest) (*fleetv1.RegisterResponse, error) {
	return delegate(f, ctx, req, (*Coordinator).Register)
}

func (f *front) AddRepo(ctx context.Context, req *fleetv1.AddRepoRequest) (*fleetv1.AddRepoResponse, error) {
	return delegate(f, ctx, req, (*Coordinator).AddRepo)
}

func (f *front) RemoveRepo(ctx context.Context, req *fleetv1.RemoveRepoRequest) (*fleetv1.RemoveRepoResponse, error) {
	return delegate(f, ctx, req, (*Coordinator).RemoveRepo)
}

func (f *front) FetchNow(ctx context.Context, req *fleetv1.FetchNowRequest) (*fleetv1.FetchNowResponse, error) {
	return delegate(f, ctx, req, (*Coordinator).FetchNow)
}

func (f *front) ListNodes(ctx context.Context, req *fleetv1.ListNodesRequest) (*fleetv1.ListNodesResponse, error) {
	return delegate(f, ctx, req, (*Coordinator).ListNodes)
}

func (f *front) ConfirmPurge(ctx context.Context, req *fleetv1.ConfirmPurgeRequest) (*fleetv1.ConfirmPurgeResponse, error) {
	return delegate(f, ctx, req, (*Coordinator).ConfirmPurge)
}

func (f *front) RevokeNode(ctx context.Context, req *fleetv1.RevokeNodeRequest) (*fleetv1.RevokeNodeResponse, error) {
	return delegate(f, ctx, req, (*Coordinator).RevokeNode)
}

func (f *front) CatalogStatus(ctx context.Context, req *fleetv1.CatalogStatusRequest) (*fleetv1.CatalogStatusResponse, error) {
	return delegate(f, ctx, req, (*Coordinator).CatalogStatus)
}

// Session runs a node's session on the leading coordinator; it ends when
// the leadership does, so that the node goes to the new leader.
func (f *front) Session(stream fleetv1.Coordinator_SessionServer) error {
	c, term, err := f.leader(stream.Context())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(term, cancel)
	defer stop()
	return c.Session(termStream{stream, ctx})
}

// termStream is a session stream whose context also ends with the term.
type termStream struct {
	fleetv1.Coordinator_SessionServer
	ctx context.Context
}

func (s termStream) Context() context.Context { return s.ctx }

var _ grpc.ServerStream = termStream{}
