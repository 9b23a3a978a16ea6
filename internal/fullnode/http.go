package fullnode

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
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
	f.mu.Lock()
	e, _ := f.view.Entry(key)
	in, _ := f.view.Input(key)
	f.mu.Unlock()
	if withheldState(in.State, e.StateSince(), f.cfg.Retention, f.clk.Now()) {
		return "", false
	}
	return f.mirror.Path(key), true
}

// withheld tells whether the mirror of a repository in state st is not
// served: its upstream is gone for a legal reason (at once), or gone for
// another (deleted, disabled, gone) for longer than --retention; until
// then the mirror serves its last verified state.
func (f *Node) withheld(st *fleetv1.RepoState, now time.Time) bool {
	s, _ := repostate.Parse(st.GetState())
	return withheldState(s, st.GetStateSinceMs(), f.cfg.Retention, now)
}

// withheldState is withheld's rule: a state first seen at since (unix
// ms; 0: unknown, served) and the retention (0: none, withheld at once).
func withheldState(s repostate.State, since int64, retention time.Duration, now time.Time) bool {
	switch {
	case s == repostate.Legal:
		return true
	case !s.Departed() || since == 0:
		return false
	}
	return now.Sub(time.UnixMilli(since)) >= retention
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
