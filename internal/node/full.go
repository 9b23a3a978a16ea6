package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/console"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/tunnel"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// fullNode is the aggregator part of a full node: it knows every
// repository (from the coordinator), pulls each from its owner through the
// owner's tunnel when the owner reports a change, and serves the public.
type fullNode struct {
	fleet *fleetCache // the coordinator's answers for public reads (fleetcache.go)
	n     *Node

	httpLn, tunnelLn, proxyLn net.Listener
	tunnels                   *tunnel.Server
	api                       *api.Server
	tasks                     *api.Tasks
	events                    *api.Broker
	backend                   *backend
	creds                     *tunnelCreds
	console                   http.Handler        // the operator's console (http.go)
	consoleSrc                *consoleSource      // what it shows (console.go)
	packs                     *gitserve.PackCache // nil: no pack cache (packcache.go)

	mu      sync.Mutex
	view    *viewTable      // every repository's state, as the coordinator sent it (view.go)
	sorted  sortedIndex     // the keys of view, for the API's listings
	counts  *repoCounters   // of view, by state and owner (counters.go)
	classMu sync.Mutex      // serializes reclass
	pending map[string]bool // keys waiting for a pull
	pulling map[string]bool
	retryAt map[string]time.Time
	// pullFails counts the failed pulls of a key in a row (its backoff).
	pullFails map[string]int
	signal    chan struct{}
	mark      diskMark        // the disk against its high water (fulldisk.go)
	diskWait  map[string]bool // keys refused for disk, waiting for room
	// overLimit holds the owner's digest whose pull was over a limit: not
	// pulled again until the owner reports another (pullsize.go).
	overLimit map[string]string

	proxySecret string                                                    // required by proxyLn (proxyauth.go)
	mismatches  mismatchLedger                                            // forged tips served, by node (verify.go)
	forgeries   forgerySet                                                // the forged tips counted in mismatches (pullcheck.go)
	revoke      func(ctx context.Context, id uint32, reason string) error // nil: count only
	stale       staleCounter                                              // verified_at of every repository, for alerts (staleness.go)
	alerts      *alerting                                                 // alerts.go

	// The full node's own word on freshness (freshness.go, upstreamcheck.go).
	hints         hintBook                 // changes heard of, not yet settled
	staleReports  mismatchLedger           // stale reports, by node
	checking      map[string]chan struct{} // keys whose upstream is being asked; closed when done
	restored      map[string]uint32        // stored verified_at, until the coordinator sends the key
	verifiedDirty map[string]uint32        // verified_at to store (0: delete), by persistLoop
	claims        []staleClaim             // stale reports for freshLoop to count
	freshWake     chan struct{}
	feedCovers    map[string]bool // hosts a working forge feed covers: no spot checks there; under mu
	feedsFailing  []string        // hosts whose forge feed fails: an alert; under mu
}

func newFullNode(n *Node) (*fullNode, error) {
	f := &fullNode{n: n, creds: newTunnelCreds(n.clk), pending: map[string]bool{},
		pulling: map[string]bool{}, retryAt: map[string]time.Time{}, pullFails: map[string]int{}, diskWait: map[string]bool{}, overLimit: map[string]string{}, signal: make(chan struct{}, 1),
		counts: newRepoCounters(), hints: newHintBook(n.cfg.HintWait, maxHints), checking: map[string]chan struct{}{},
		freshWake: make(chan struct{}, 1)}
	f.view = newViewTable(f.counts.classes.tab) // one slot a repository for both (repotable.go)
	n.verify.changed = func(key string) { f.reclass(key) }
	var err error
	if f.proxySecret, err = newProxySecret(); err != nil {
		return nil, err
	}
	if f.packs, err = openPackCache(n); err != nil {
		return nil, err
	}
	token, err := apiToken(n.cfg.DataDir, n.cfg.API.Token, n.log)
	if err != nil {
		return nil, err
	}
	cfg := n.cfg.API
	cfg.Token = token
	cfg.PublicURL = n.cfg.PublicURL
	cfg.AllowPrivate = n.cfg.AllowPrivate
	cfg.Fold = n.cfg.Fold
	cfg.Egress = n.dialer
	f.tasks = api.NewTasks(n.clk, 10000)
	f.events = api.NewBroker(0, 0, n.log)
	f.backend = newBackend(f)
	f.fleet = &fleetCache{f: f}
	f.revoke = f.backend.RevokeNode // --mismatch-revoke
	f.api = api.New(cfg, f.backend, f.tasks, f.events, n.log, n.clk)
	if f.alerts, err = newAlerting(n); err != nil {
		return nil, err
	}
	f.consoleSrc = newConsoleSource(f)
	f.console = console.New(f.consoleSrc, n.log, n.clk)
	return f, nil
}

// listen opens the public HTTP, tunnel and local proxy listeners, so that
// a port that is taken fails the start at once.
func (f *fullNode) listen() error {
	cfg := f.n.cfg
	var err error
	f.httpLn, f.tunnelLn = cfg.HTTPListener, cfg.TunnelListener
	if f.httpLn == nil {
		if f.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return fmt.Errorf("full node: listen --http %s: %w", cfg.HTTPAddr, err)
		}
	}
	if f.tunnelLn == nil {
		if f.tunnelLn, err = net.Listen("tcp", cfg.TunnelAddr); err != nil {
			return fmt.Errorf("full node: listen --tunnel %s: %w", cfg.TunnelAddr, err)
		}
	}
	// git reaches owners through this loopback-only reverse proxy.
	if f.proxyLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return fmt.Errorf("full node: listen on loopback: %w", err)
	}
	f.n.log.Info("full node listening", "http", f.httpLn.Addr().String(), "tunnel", f.tunnelLn.Addr().String(),
		"proxy", f.proxyLn.Addr().String())
	f.tunnels = tunnel.NewServer(f.creds.authenticate, f.n.log, cfg.TunnelTLS)
	return nil
}

// publicURL is where this full node serves git to others.
func (f *fullNode) publicURL() string {
	if u := f.n.cfg.PublicURL; u != "" {
		return strings.TrimSuffix(u, "/")
	}
	return "http://" + f.httpLn.Addr().String()
}

// tunnelAdvertise is the tunnel address given to partial nodes.
func (f *fullNode) tunnelAdvertise() string {
	if a := f.n.cfg.TunnelAdvertise; a != "" {
		return a
	}
	return f.tunnelLn.Addr().String()
}

func (f *fullNode) serve(ctx context.Context) error {
	n := f.n
	servers := []*http.Server{
		{Handler: f.publicHandler(), ReadHeaderTimeout: 10 * time.Second},
		{Handler: metrics.CountBytes(requireProxySecret(f.proxySecret, f.tunnels.ReverseProxy()), n.met.addFetched("owner")),
			ReadHeaderTimeout: 10 * time.Second},
	}
	errc := make(chan error, 3)
	go func() { errc <- servers[0].Serve(f.httpLn) }()
	go func() { errc <- servers[1].Serve(f.proxyLn) }()
	go func() { errc <- f.tunnels.Serve(ctx, f.tunnelLn) }()
	var wg sync.WaitGroup
	for i := 0; i < n.cfg.Fetchers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); f.pullLoop(ctx) }()
	}
	if n.cfg.Retention > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); f.sweepLoop(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); f.alertLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); f.freshLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); f.persistLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); f.consoleSrc.sampleLoop(ctx) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	f.api.Close() // ends event streams, so that Shutdown does not wait for them
	for _, s := range servers {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Shutdown(sctx)
		cancel()
	}
	f.tunnelLn.Close()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) || ctx.Err() != nil {
		return nil
	}
	return err
}

// states records repository states from the coordinator and queues pulls
// where the owner's mirror differs from ours. An owner's report weighs on
// the change hints (freshness.go): one that says "unchanged" after a push
// makes the full node ask the upstream, or counts against the owner.
func (f *fullNode) states(rs []*fleetv1.RepoState) {
	f.unretireNew(rs)
	now := f.n.clk.Now()
	var wake bool
	f.mu.Lock()
	keys := make([]string, 0, len(rs))
	for _, r := range rs {
		key := r.GetKey()
		keys = append(keys, key)
		old, had := f.view.put(r)
		if !had {
			f.sorted.add(key)
			if s, ok := f.restored[key]; ok {
				f.view.setVerified(key, s)
				f.stale.move(0, int64(s)*1000)
				delete(f.restored, key)
			}
		}
		if had && r.GetLastCheckMs() > old.lastCheck && r.GetOwner() != f.n.id {
			f.n.flog.Append(ownerCheck(r, old.digestString())) // the owner's own check, as the coordinator tells it
			if r.GetLastError() == "" {
				switch f.hints.reported(key, r.GetOwner(), time.UnixMilli(r.GetLastCheckMs()), r.GetDigest(), now) {
				case hintCheckNow:
					wake = true
				case hintCountStale: // counted by freshLoop, which can revoke
					f.claims = append(f.claims, staleClaim{key, r.GetOwner()})
					wake = true
				}
			}
		}
		// Not pulled: a copy of the owner's found behind the upstream, or
		// one that claims "unchanged" after a push (the full node asks the
		// upstream instead).
		if r.GetOwner() != 0 && r.GetOwner() != f.n.id && r.GetDigest() != "" && r.GetDigest() != f.hints.stale(key) &&
			!f.hints.claims(key, r.GetDigest()) {
			if d, _ := f.n.digest(key); d != r.GetDigest() && !f.diskWait[key] && f.overLimit[key] != r.GetDigest() {
				f.pending[key] = true
				delete(f.retryAt, key)
			}
		}
	}
	f.mu.Unlock()
	f.reclass(keys...)
	f.kick()
	if wake {
		f.wakeFresh()
	}
}

// staleClaim is an owner's report that the hint book counts as stale.
type staleClaim struct {
	key   string
	owner uint32
}

// removed stops serving repositories that left the catalog; their data is
// kept for cfg.Retention (see retain.go).
func (f *fullNode) removed(keys []string) {
	for _, k := range keys {
		f.mu.Lock()
		if old, ok := f.view.del(k); ok {
			f.stale.move(int64(old.verifiedAt)*1000, 0)
			f.sorted.remove(k)
			if old.verifiedAt != 0 {
				f.markVerified(k, 0)
			}
		}
		f.hints.forget(k)
		delete(f.pending, k)
		delete(f.diskWait, k)
		delete(f.overLimit, k)
		delete(f.pullFails, k)
		delete(f.retryAt, k)
		f.mu.Unlock()
		f.reclass(k)
		remove, msg := f.n.mirror.Retire, "repository removed from the mirror; its data is kept for a re-addition"
		if f.n.cfg.Retention <= 0 {
			remove, msg = f.n.mirror.Remove, "repository removed from the mirror"
		}
		if err := remove(k); err != nil {
			f.n.log.Error("remove repository", "key", k, "err", err)
			continue
		}
		f.n.forgetDigest(k)
		f.n.log.Info(msg, "key", k, "retention", f.n.cfg.Retention)
	}
}

// ownSynced notes that this node, as the owner, fetched key itself from
// the upstream with a check that started at start: what it serves is the
// upstream's refs as of then.
func (f *fullNode) ownSynced(key string, start time.Time) {
	f.mu.Lock()
	delete(f.pending, key)
	f.hints.verified(key, start)
	f.mu.Unlock()
	f.setVerified(key, start)
}

func (f *fullNode) kick() {
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// nextPull picks a pending key that is not being pulled and not waiting
// for a retry.
func (f *fullNode) nextPull(now time.Time) (string, *fleetv1.RepoState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.pending {
		if f.pulling[k] || now.Before(f.retryAt[k]) {
			continue
		}
		delete(f.pending, k)
		f.pulling[k] = true
		return k, f.view.get(k), true
	}
	return "", nil, false
}

func (f *fullNode) pullLoop(ctx context.Context) {
	for ctx.Err() == nil {
		f.measureDisk()
		key, st, ok := f.nextPull(f.n.clk.Now())
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-f.signal:
			case <-f.n.clk.After(time.Second):
			}
			continue
		}
		done, ok := f.admit(key)
		if !ok {
			continue
		}
		err := f.pull(ctx, key, st)
		done()
		f.mu.Lock()
		delete(f.pulling, key)
		if ctx.Err() == nil {
			f.settlePull(key, st, err)
		}
		f.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			f.n.log.Warn("pull from owner failed; will retry", "key", key, "err", err)
		}
		f.kick()
	}
}

// settlePull records the end of a pull of key (state st) that ended with
// err. Caller holds f.mu.
func (f *fullNode) settlePull(key string, st *fleetv1.RepoState, err error) {
	// The owner served more than a limit allows (pullTooLarge noted its
	// digest), whatever the upstream fetch after it gave.
	tooBig := st.GetDigest() != "" && f.overLimit[key] == st.GetDigest()
	switch {
	case err != nil && (overLimit(err) || tooBig):
		// Over --max-repo-size or --max-refs: tried again when the
		// owner reports another digest (or on demand), never on a
		// timer: each try could move as much as the limit.
		delete(f.pullFails, key)
		delete(f.retryAt, key)
		f.overLimit[key] = st.GetDigest()
	case err != nil:
		// From 2 s, doubling to 30 s: a pull whose upstream check
		// keeps failing must not ask the owner and the upstream every
		// 2 s. A new state from the coordinator tries at once.
		f.pullFails[key]++
		f.pending[key] = true
		f.retryAt[key] = f.n.clk.Now().Add(backoff(f.pullFails[key]-1, 2*time.Second, 30*time.Second))
	default:
		delete(f.pullFails, key)
		delete(f.retryAt, key)
		if !tooBig { // fetched from the upstream instead: the owner's digest stays refused
			delete(f.overLimit, key)
		}
	}
}

// pull fetches key's new objects from its owner through the owner's tunnel.
func (f *fullNode) pull(ctx context.Context, key string, st *fleetv1.RepoState) error {
	if st == nil {
		return nil // removed meanwhile
	}
	owner := st.GetOwner()
	if owner == f.n.id {
		return nil
	}
	if !f.tunnels.Connected(owner) {
		return fmt.Errorf("owner node %d has no tunnel open", owner)
	}
	url := fmt.Sprintf("http://%s/%d/%s.git", f.proxyLn.Addr().String(), owner, key)
	start := f.n.clk.Now()
	f.n.log.Debug("pulling from owner", "key", key, "owner", owner) // one line per attempt
	had := f.n.mirror.Has(key)
	res, seen, refused, err := f.pullVerified(ctx, key, st, owner, url)
	f.n.met.pulled(kindOf(had, res), f.n.clk.Now().Sub(start), err)
	if refused != nil {
		// The pull is shown refused; what changed came from the upstream.
		f.n.flog.Append(refusedEntry(key, f.n.id, start, refused))
		f.n.flog.Append(f.n.workEntry(key, "check", refused.at, res, nil))
	} else {
		e := f.n.workEntry(key, "pull", start, res, err)
		e.From = owner
		f.n.flog.Append(e)
	}
	if err != nil {
		return err
	}
	f.served(key, res)
	digest := res.After.Digest()
	f.n.setDigest(key, digest)
	f.afterPull(key, owner, res, seen)
	if res.Changed {
		f.n.log.Info("pulled from owner", "key", key, "owner", owner, "cloned", res.Cloned, "digest", digest)
	}
	f.n.report(&fleetv1.CheckResult{Key: key, CheckedAtMs: start.UnixMilli(), Ok: true, Served: true,
		Cloned: res.Cloned, Fetched: res.Fetched, Changed: res.Changed, Digest: digest,
		DurationMs: f.n.clk.Now().Sub(start).Milliseconds()})
	return nil
}

// pullNow pulls key from its owner at once (an on-demand check's result).
func (f *fullNode) pullNow(ctx context.Context, key, digest string) error {
	f.mu.Lock()
	st := f.view.get(key)
	f.mu.Unlock()
	if st == nil {
		return fmt.Errorf("repository %s is no longer mirrored", key)
	}
	if st.GetOwner() == f.n.id {
		return nil // fetched by this node itself
	}
	if digest == "" {
		return nil // an empty mirror is not pulled, as in states
	}
	done, err := f.admitNow(key) // the disk's high water (fulldisk.go)
	if err != nil {
		return fmt.Errorf("repository %s: %w", key, err)
	}
	defer done()
	return f.pull(ctx, key, st)
}

// resolve serves a repository only when the catalog lists it and a
// complete mirror is on disk.
func (f *fullNode) resolve(key string) (string, bool) {
	f.mu.Lock()
	listed := f.view.has(key)
	f.mu.Unlock()
	if !listed || !f.n.mirror.Has(key) || f.n.verify.brokenState(key) != "" {
		return "", false
	}
	return f.n.mirror.Path(key), true
}

func (f *fullNode) publicHandler() http.Handler {
	gs := &gitserve.Handler{Git: f.n.git, Resolve: f.resolve, Log: f.n.log, Limits: f.n.cfg.Serve, Fold: f.n.cfg.Fold,
		OnFailure: f.n.serveFailed, Cache: f.packs, Clock: f.n.clk}
	// Its slots and its pack cache on /metrics (servecollect.go); a
	// handler made again (benchmarks) keeps the first one's figures.
	_ = f.n.cfg.Metrics.Register(serveCollector{gs, f.packs})
	git := metrics.CountBytes(gs, f.n.met.addServed("public"))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", metrics.Handler(f.n.cfg.Metrics, f.n.log))
	mux.Handle("/api/", f.api)
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

// partial nodes serve their own mirrors to full nodes through the tunnel.
func (n *Node) tunnelHandler() http.Handler {
	return metrics.CountBytes(&gitserve.Handler{Git: n.git, Log: n.log, OnFailure: n.serveFailed, Resolve: func(key string) (string, bool) {
		if !n.mirror.Has(key) || n.verify.brokenState(key) != "" {
			return "", false
		}
		return n.mirror.Path(key), true
	}}, n.met.addServed("full-node"))
}
