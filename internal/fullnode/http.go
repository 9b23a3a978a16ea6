package fullnode

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// The public HTTP of the full node: git at /<host>/<path>.git, the JSON
// API under /api/, webhooks under /hooks/, the console at / and under /-/,
// /metrics and /healthz.

// resolve serves a repository only when the catalog lists it and a
// complete mirror is on disk.
func (f *Node) resolve(key repokey.Key) (string, bool) {
	f.mu.Lock()
	listed := f.view.Has(key)
	f.mu.Unlock()
	if !listed || !f.mirror.Has(key) {
		return "", false
	}
	if _, broken := f.n.BrokenState(key); broken {
		return "", false
	}
	return f.mirror.Path(key), true
}

// held tells whether key's mirror is complete on disk.
func (f *Node) held(key repokey.Key) bool { return f.mirror.Has(key) }

// refs reads the refs of key's mirror.
func (f *Node) refs(ctx context.Context, key repokey.Key) (gitcmd.Refs, error) {
	return f.mirror.Refs(ctx, key)
}

func (f *Node) publicHandler() http.Handler {
	gs := &gitserve.Handler{Git: f.n.Git(), Resolve: f.resolve, Log: f.log, Limits: f.cfg.Serve, Fold: f.cfg.Fold,
		OnFailure: f.n.ServeFailed, Cache: f.packs, Clock: f.clk, Relay: f.relayFor}
	// Its slots and its pack cache on /metrics (servecollect.go); a
	// handler made again (benchmarks) keeps the first one's figures.
	_ = f.cfg.Metrics.Register(serveCollector{gs, f.packs, f.conns})
	git := metrics.CountBytes(gs, f.countServed(f.n.CountServed("public")))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", metrics.Handler(f.cfg.Metrics, f.log))
	mux.Handle("/api/", f.relayReads(f.api, f.api.RepoOf, f.api.RelayHeaders)) // relay.go
	mux.Handle("/hooks/", f.api)
	overview := f.mountConsole(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := gitserve.Match(r.URL.Path); ok {
			git.ServeHTTP(w, r)
			return
		}
		if overview(w, r) {
			return
		}
		http.NotFound(w, r)
	})
	return gitserve.RefuseEncodedSeparators(mux)
}

// mountConsole serves the operator's console (package console, fed by
// console.go): the overview at / and its pages under /-/, which no
// repository key can start with; a repository's public status and badge
// are relayed to a replica when this node does not serve it (relay.go).
func (f *Node) mountConsole(mux *http.ServeMux) func(w http.ResponseWriter, r *http.Request) bool {
	mux.Handle("/-/", f.relayReads(f.console, consoleRepoOf, noHeaders))
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/" {
			return false
		}
		f.console.ServeHTTP(w, r)
		return true
	}
}
