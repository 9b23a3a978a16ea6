package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/gitfleet/gitfleet/internal/config"
)

// withPprof runs run and, with --pprof, serves Go's runtime profiles at
// ADDR/debug/pprof/ while it runs.
func withPprof(ctx context.Context, cfg config.Config, log *slog.Logger, run func(context.Context) error) error {
	ln, err := listenPprof(cfg)
	if err != nil {
		return err
	}
	return servePprof(ctx, ln, log, run)
}

// listenPprof binds --pprof; nil without it.
func listenPprof(cfg config.Config) (net.Listener, error) {
	if cfg.Pprof == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Pprof)
	if err != nil {
		return nil, fmt.Errorf("listen --pprof %s: %w", cfg.Pprof, err)
	}
	return ln, nil
}

// servePprof runs run and serves the profiles on ln (nil: none) while it
// runs. The handlers are mounted on a mux of their own, never on the
// public listener.
func servePprof(ctx context.Context, ln net.Listener, log *slog.Logger, run func(context.Context) error) error {
	if ln == nil {
		return run(ctx)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving profiles", "addr", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("profiles server ended", "err", err)
		}
	}()
	defer srv.Close()
	return run(ctx)
}
