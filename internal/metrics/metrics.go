// Package metrics holds what every role's Prometheus figures share: a
// registry per process (never the default global one) with the Go runtime
// and process collectors, the handler and listener that serve it, the
// buckets of durations, a bound on the hosts used as label values, a
// byte-counting wrapper of HTTP answers, and a wrapper of the store that
// times its writes.
//
// It has no package-level state: each role (node, coordinator) registers
// its own families on the registry the process gives it, and updates them
// where things happen; nothing here walks repositories.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is what a role registers its families on and what is served:
// a *prometheus.Registry (tests wrap one to see every collector).
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// NewRegistry returns a registry for one process, with the Go runtime's and
// the process's collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves g in the Prometheus exposition formats. A collector that
// fails leaves its families out of the answer; the rest is still served.
func Handler(g prometheus.Gatherer, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
}

// Listen opens addr for Serve, so that a port that is taken fails a start
// at once.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen --metrics %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves g at /metrics on ln until ctx ends (the --metrics listener
// of a coordinator or a partial node).
func Serve(ctx context.Context, ln net.Listener, g prometheus.Gatherer, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(g, log))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("metrics listening", "addr", ln.Addr().String())
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("metrics: serve %s: %w", ln.Addr(), err)
	}
}

// Register registers c on reg and returns it, or the collector of the same
// description that reg already holds: in `gitfleet up` the coordinator and
// the full node share one registry and some families (the store's).
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("metrics: register: %v", err))
	}
	return c
}

// DurationBuckets are the buckets of the histograms of git work (checks,
// fetches, clones, pulls): from 10 ms to 30 minutes (--git-timeout).
func DurationBuckets() []float64 {
	return []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
}

// StoreBuckets are the buckets of the store's write latency: from 100 µs
// (a bbolt put without sync) to 10 s (an etcd transaction under load).
func StoreBuckets() []float64 {
	return []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}
}
