package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Serve runs a coordinator with its gRPC service on ln until ctx ends or
// the service fails. Its error includes that of the last persist, when
// the state could not be stored on the way out.
func Serve(ctx context.Context, cfg Config, log *slog.Logger, ln net.Listener) error {
	cfg.met = newCoordMetrics(cfg.Metrics)
	c, err := New(ctx, cfg, log, clock.Real{})
	if err != nil {
		return err
	}
	defer c.Close()
	srv := newServer(cfg)
	fleetv1.RegisterCoordinatorServer(srv, c)
	ctx, stop := context.WithCancel(ctx) // a failed service stops Run too
	defer stop()
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() { defer wg.Done(); runErr = c.Run(ctx) }()
	log.Info("coordinator listening", "grpc", ln.Addr().String(), "tls", cfg.TLS != nil, "catalog", repokey.Redact(cfg.Catalog))
	err = serveUntil(ctx, srv, ln)
	stop()
	wg.Wait()
	if runErr != nil {
		err = errors.Join(err, fmt.Errorf("coordinator: stopping: %w", runErr))
	}
	return err
}

// newServer is the gRPC server of a coordinator.
func newServer(cfg Config) *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(64 << 20),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	return grpc.NewServer(opts...)
}

// serveUntil serves ln until ctx ends or the server fails.
func serveUntil(ctx context.Context, srv *grpc.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		srv.Stop()
	case err = <-errc:
	}
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}
