package main

import (
	"context"
	"log/slog"

	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/metrics"
)

// withMetrics runs run with the process's registry (one for every role
// the process runs) and, with --metrics, serves it at ADDR/metrics while
// run runs. A full node serves it on --http as well.
func withMetrics(ctx context.Context, cfg config.Config, log *slog.Logger, run func(context.Context, metrics.Registry) error) error {
	reg := metrics.NewRegistry()
	if cfg.Metrics == "" {
		return run(ctx, reg)
	}
	ln, err := metrics.Listen(cfg.Metrics)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		err := metrics.Serve(ctx, ln, reg, log)
		if err != nil {
			cancel() // a node whose metrics stop must not run on unseen
		}
		errc <- err
	}()
	err = run(ctx, reg)
	cancel()
	if serr := <-errc; err == nil {
		err = serr
	}
	return err
}
