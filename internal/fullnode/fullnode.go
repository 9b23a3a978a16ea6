// Package fullnode is the full node: the aggregator that holds its share
// of the fleet's repositories (all of them with no more full nodes than
// --full-replicas) and serves the public for every repository. It owns a
// node.Node (the runtime every node runs: session, checks, disk, fetch
// log, integrity, maintenance) and adds, through the node's Role hooks,
// what only a full node does: the view of every repository as the
// coordinator sends its state (package repoview), the pulls of the
// repositories placed on it (their replicas name it, or none are given)
// from each one's owner through the owner's tunnel, checked against the
// upstream (forged tips counted, owners revoked), or from another full
// node's copy checked against the verified digest (a join, a loss, a
// repair: peer.go), the tier's drops (peer.go), the relay of git
// requests and of a repository's reads (its API detail and log, its
// status and badge) for the others to a replica, and the answers to those
// relayed to it (relay.go), the full node's own
// word on freshness (verified_at, change hints, spot checks), the
// tunnels' credentials, the pack cache,
// the retention of removed repositories, the full-disk policy, the alerts,
// the console's figures, and the public HTTP: git, the JSON API, webhooks,
// the console, /metrics and /healthz.
//
// Only an operator runs it (`gitfleet node --mode full`, `gitfleet up`);
// nothing here runs on a volunteer's machine. It must not fetch from an
// upstream what another node owns, except to check that owner (a pull the
// upstream does not confirm, a hint the owner does not answer, a spot
// check); the repositories it owns itself its runtime fetches. It never
// publishes a ref that the upstream does not have.
//
// Decisions about time made here: the full-disk policy's mark
// (fulldisk.go), the spot checks' pace (freshLoop, upstreamcheck.go), the
// retention's sweep (retain.go), the alerts' evaluation (alerts.go, with
// package alert's rules), how long the coordinator's answers are reused
// (fleetcache.go) and when the console's series is sampled and stored
// (trends.go). Which key to pull next and when, the pull backoff, the
// waits for disk room and for an owner's next digest after a pull over a
// limit, the hint book's wait, the stale reports and the spot checks'
// choice are package pullplan's: the full node feeds it the states, the
// pulls' ends, the disk's measures and the hints under f.mu, and runs
// what it decides (pullLoop, freshLoop). The runtime's (checks,
// integrity, maintenance) are package node's and package schedule's.
//
// Here to verify is to compare a mirror's refs with its upstream's
// (verified_at, pullVerified, verifyOnDemand); the integrity scan of the
// mirrors on disk is the runtime's (package node), and git's fsck of what
// a fetch brings is package mirror's.
package fullnode

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/console"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/pullplan"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repoview"
	"github.com/gitfleet/gitfleet/internal/series"
	"github.com/gitfleet/gitfleet/internal/store"
	"github.com/gitfleet/gitfleet/internal/tunnel"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Node is a full node: it knows every repository (from the coordinator),
// pulls each from its owner through the owner's tunnel when the owner
// reports a change, and serves the public. It is the role of the runtime
// it owns (role.go).
type Node struct {
	cfg    Config
	log    *slog.Logger
	clk    clock.Clock
	n      *node.Node    // the runtime
	mirror *mirror.Store // the runtime's parts, kept at hand
	db     store.Store
	flog   *fetchlog.Log
	fleet  *fleetCache // the coordinator's answers for public reads (fleetcache.go)

	httpLn, tunnelLn, proxyLn net.Listener
	tunnels                   *tunnel.Server
	api                       *api.Server
	tasks                     *api.Tasks
	events                    *api.Broker
	backend                   *backend
	creds                     *tunnelCreds
	console                   http.Handler             // the operator's console (http.go)
	consoleSrc                *consoleSource           // what it shows (console.go)
	packs                     *gitserve.PackCache      // nil: no pack cache (packcache.go)
	conns                     *gitserve.ConnLimit      // the public server's connections per client address
	relay                     http.Handler             // to the replicas of what is not served here (relay.go)
	pulls                     *prometheus.HistogramVec // kind, result (promcollect.go)
	peerCopies                *prometheus.CounterVec   // result (peer.go)
	moves                     chan struct{}            // a slot per peer copy under way (peer.go)
	work                      work                     // goroutines the session's messages start

	mu      sync.Mutex
	view    *repoview.View       // every repository's state, as the coordinator sent it
	sorted  repoview.SortedIndex // the keys of view, for the API's listings
	counts  *repoview.Counters   // of view, by state and owner (classes.go)
	classMu sync.Mutex           // serializes reclass
	// plan decides the pulls and the upstream checks: the queue and its
	// backoff, the keys waiting for disk room or for the owner's next
	// digest (over a limit), the change hints and the stale reports.
	plan *pullplan.Plan
	// keptDrops are the tier's drops kept because no other replica served
	// the verified state yet (peer.go): tried again by dropRetryLoop, for
	// the coordinator sends a drop once.
	keptDrops map[repokey.Key]struct{}
	signal    chan struct{}
	heads     chan repokey.Key // HEAD switches the owners reported (headLoop)
	mark      diskMark         // the disk against its high water (fulldisk.go)

	proxySecret string                                                    // required by proxyLn (proxyauth.go)
	mismatches  mismatchLedger                                            // forged tips served, by node (pullverify.go)
	forgeries   forgerySet                                                // the forged tips counted in mismatches (pullverify.go)
	revoke      func(ctx context.Context, id uint32, reason string) error // nil: count only
	stale       repoview.StaleCounter                                     // verified_at of every repository, for alerts
	alerts      *alerting                                                 // alerts.go

	// The full node's own word on freshness (upstreamcheck.go; its rules
	// are plan's).
	staleReports  mismatchLedger                // stale reports, by node
	checking      map[repokey.Key]chan struct{} // keys whose upstream is being asked; closed when done
	restored      map[string]uint32             // stored verified_at, until the coordinator sends the key
	verifiedDirty map[repokey.Key]uint32        // verified_at to store (0: delete), by persistLoop
	freshWake     chan struct{}
	feedCovers    map[string]bool     // hosts a working forge feed covers: no spot checks there; under mu
	feedsFailing  []string            // hosts whose forge feed fails: an alert; under mu
	feedsLimited  []string            // hosts whose forge feed a rate limit holds back: an alert; under mu
	feedHosts     []*fleetv1.FeedHost // each feed's figures, for the API; under mu

	// The figures over time that the console draws (trends.go).
	series         *series.Series
	seriesMu       sync.Mutex      // serializes storeSeries
	seriesUnstored []series.Stored // buckets a failed write left, under seriesMu
}

// New prepares a full node and its runtime in cfg.DataDir.
func New(cfg Config, log *slog.Logger, clk clock.Clock) (*Node, error) {
	if cfg.FullDiskPolicy == "" {
		cfg.FullDiskPolicy = FullDiskRefuseNew
	}
	if cfg.HintWait <= 0 {
		cfg.HintWait = 3 * time.Minute
	}
	if cfg.MoveConcurrency <= 0 {
		cfg.MoveConcurrency = 2
	}
	f := &Node{cfg: cfg, log: log, clk: clk, creds: newTunnelCreds(clk), plan: pullplan.New(pullplan.Config{HintWait: cfg.HintWait}),
		signal: make(chan struct{}, 1), heads: make(chan repokey.Key, headQueue), moves: make(chan struct{}, cfg.MoveConcurrency), checking: map[repokey.Key]chan struct{}{}, freshWake: make(chan struct{}, 1), series: series.New()}
	f.view, f.counts = repoview.New() // one slot a repository for both
	if _, err := node.New(cfg.Config, log, clk, f.attach); err != nil {
		return nil, err
	}
	return f, nil
}

// attach builds the full node around its runtime n, as node.New asks.
func (f *Node) attach(n *node.Node) (node.Role, error) {
	f.n = n
	f.cfg.Config = n.Config() // with the runtime's defaults
	f.mirror, f.db, f.flog = n.Mirror(), n.Store(), n.FetchLog()
	f.proxySecret = rand.Text()
	var err error
	if f.packs, err = openPackCache(f.cfg, f.clk); err != nil {
		return nil, err
	}
	if f.packs != nil {
		n.SetTunnelCache(f.packs) // what another full node relays to this one
	}
	n.SetTunnelReads(f.relayedReads()) // relay.go
	token, err := apiToken(f.cfg.DataDir, f.cfg.API.Token, f.log)
	if err != nil {
		return nil, err
	}
	cfg := f.cfg.API
	cfg.Token = token
	cfg.PublicURL = f.cfg.PublicURL
	cfg.AllowPrivate = f.cfg.AllowPrivate
	cfg.Fold = f.cfg.Fold
	cfg.Egress = n.Dialer()
	f.tasks = api.NewTasks(f.clk, 10000)
	f.events = api.NewBroker(0, 0, f.log)
	f.backend = newBackend(f)
	f.fleet = &fleetCache{f: f}
	f.revoke = f.backend.RevokeNode // --mismatch-revoke
	f.api = api.New(cfg, f.backend.fleet(), f.tasks, f.events, f.log, f.clk)
	if f.alerts, err = newAlerting(f.cfg, n.Dialer(), f.clk, f.log); err != nil {
		return nil, err
	}
	f.consoleSrc = newConsoleSource(f)
	f.console = console.New(f.consoleSrc, f.log, f.clk)
	f.conns = &gitserve.ConnLimit{PerClient: f.cfg.MaxConnsPerClient, Log: f.log, Clock: f.clk}
	f.registerMetrics(f.cfg.Metrics)
	return role{f}, nil
}

// Run runs the full node until ctx ends.
func (f *Node) Run(ctx context.Context) error { return f.n.Run(ctx) }

// listen opens the public HTTP, tunnel and local proxy listeners, so that
// a port that is taken fails the start at once.
func (f *Node) listen() (err error) {
	cfg := f.cfg
	defer func() {
		if err != nil { // what was opened before the one that failed
			for _, ln := range []net.Listener{f.httpLn, f.tunnelLn} {
				if ln != nil {
					ln.Close()
				}
			}
		}
	}()
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
	f.log.Info("full node listening", "http", f.httpLn.Addr().String(), "tunnel", f.tunnelLn.Addr().String(),
		"proxy", f.proxyLn.Addr().String())
	f.tunnels = tunnel.NewServer(f.creds.authenticate, f.log, cfg.TunnelTLS)
	f.relay = f.newRelay(f.tunnels)
	return nil
}

// publicURL is where this full node serves git to others.
func (f *Node) publicURL() string {
	if u := f.cfg.PublicURL; u != "" {
		return strings.TrimSuffix(u, "/")
	}
	return "http://" + f.httpLn.Addr().String()
}

// tunnelAdvertise is the tunnel address given to partial nodes.
func (f *Node) tunnelAdvertise() string {
	if a := f.cfg.TunnelAdvertise; a != "" {
		return a
	}
	return f.tunnelLn.Addr().String()
}

// serve serves the public, the proxy into the tunnels and the tunnels, and
// runs the full node's loops, until ctx ends or a server fails. It returns
// once every goroutine it started, and every one the session's messages
// started (work), has ended.
func (f *Node) serve(ctx context.Context) error {
	outer := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	servers := []*http.Server{
		{Handler: f.publicHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: f.cfg.IdleConnTimeout},
		{Handler: metrics.CountBytes(requireProxySecret(f.proxySecret, f.tunnels.ReverseProxy()), f.n.CountFetched("owner")),
			ReadHeaderTimeout: 10 * time.Second},
	}
	errc := make(chan error, 3)
	var listening sync.WaitGroup
	listening.Go(func() { errc <- servers[0].Serve(f.conns.Listen(f.httpLn)) })
	listening.Go(func() { errc <- servers[1].Serve(f.proxyLn) })
	listening.Go(func() { errc <- f.tunnels.Serve(ctx, f.tunnelLn) })
	var wg sync.WaitGroup
	for range f.cfg.Fetchers {
		wg.Go(func() { f.pullLoop(ctx) })
	}
	if f.cfg.Retention > 0 {
		wg.Go(func() { f.sweepLoop(ctx) })
	}
	if f.packs != nil {
		wg.Go(func() { f.packs.Run(ctx) })
	}
	wg.Go(func() { f.alertLoop(ctx) })
	wg.Go(func() { f.freshLoop(ctx) })
	wg.Go(func() { f.headLoop(ctx) })
	wg.Go(func() { f.persistLoop(ctx) })
	wg.Go(func() { f.seriesLoop(ctx) })
	wg.Go(func() { f.dropRetryLoop(ctx) })
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()      // a server that failed stops the loops too
	f.api.Close() // ends event streams, so that Shutdown does not wait for them
	for _, s := range servers {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Shutdown(sctx)
		cancel()
	}
	f.tunnelLn.Close()
	listening.Wait()
	wg.Wait()
	f.work.stop() // the tasks' pulls: before the runtime closes its store
	if errors.Is(err, http.ErrServerClosed) || outer.Err() != nil {
		return nil
	}
	return err
}

// states records repository states from the coordinator and queues pulls
// where the owner's mirror differs from ours. An owner's report weighs on
// the change hints (pullplan.Plan.Seen): one that says "unchanged" after a push
// makes the full node ask the upstream, or counts against the owner.
//
// A state's key is checked here, where it arrives, and nowhere after: the
// view, the plan, the pull and the mirror store take the repokey.Key.
func (f *Node) states(rs []*fleetv1.RepoState) {
	keys := make([]repokey.Key, 0, len(rs))
	valid := rs[:0:0]
	for _, r := range rs {
		k, err := repokey.Parse(r.GetKey())
		if err != nil {
			f.log.Error("coordinator sent a state with an invalid key; skipped", "key", r.GetKey(), "err", err)
			continue
		}
		keys, valid = append(keys, k), append(valid, r)
	}
	f.unretireNew(keys)
	now, self := f.clk.Now(), f.n.ID()
	var wake bool
	var seen series.Counts // the checks the states tell of, for the console's series
	var heads []repokey.Key
	f.mu.Lock()
	for i, r := range valid {
		key := keys[i]
		old, had := f.view.Put(key, r)
		if to := r.GetRenamedTo(); had && to != "" && old.RenamedTo() != to {
			f.flog.Append(renameEntry(r, now))
		}
		if had {
			seen.Add(stateCounts(old, r))
		} else {
			f.sorted.Add(key)
			if s, ok := f.restored[key.String()]; ok {
				f.view.SetVerified(key, s)
				f.stale.Move(0, int64(s)*1000)
				delete(f.restored, key.String())
			}
		}
		s := pullplan.State{Key: key, Owner: r.GetOwner(), Own: r.GetOwner() == self, Digest: r.GetDigest(),
			// A network set or changed after the last pull (found from
			// the roots, or renamed when networks merged) with nothing
			// new to pull: a pull puts the mirror in its network's pool
			// all the same (pull shares it), else it stays a whole copy
			// of its own.
			NetworkChanged: had && old.Network() != r.GetNetwork(),
			// The full tier holds it on other full nodes, which pull
			// it; this one does not. With no replicas
			// (fewer full nodes than --full-replicas, an older
			// coordinator) every full node holds everything.
			Elsewhere: elsewhere(r.GetReplicas(), self)}
		if had && r.GetLastCheckMs() > old.LastCheck() && r.GetOwner() != self {
			f.flog.Append(ownerCheck(r, old.Digest())) // the owner's own check, as the coordinator tells it
			if r.GetLastError() == "" {
				s.Checked = time.UnixMilli(r.GetLastCheckMs())
			}
		}
		if !s.Own && s.Owner != 0 && s.Digest != "" {
			s.Served, _ = f.n.Digest(key)
		}
		if had && !s.Own && r.GetHead() != "" && r.GetLastChangeMs() > old.LastChange() && s.Digest == old.Digest() && s.Served == s.Digest {
			// The owner saw a change that moved no ref: HEAD's.
			heads = append(heads, key)
		}
		// Not pulled: a copy of the owner's found behind the upstream, one
		// that claims "unchanged" after a push (the full node asks the
		// upstream instead: CheckNow), or one over a limit. A stale report
		// is counted by freshLoop, which can revoke.
		if act := f.plan.Seen(s, now); act == pullplan.CheckNow || act == pullplan.CountStale {
			wake = true
		}
	}
	f.mu.Unlock()
	if seen != (series.Counts{}) {
		f.series.Count(now, seen)
	}
	f.reclass(keys...)
	f.kick()
	for _, k := range heads {
		f.headChanged(k)
	}
	if wake {
		f.wakeFresh()
	}
}

// elsewhere tells whether replicas (a repository's full nodes on the tier)
// leave out self; never when there are none.
func elsewhere(replicas []uint32, self uint32) bool {
	return len(replicas) > 0 && !slices.Contains(replicas, self)
}

// removed stops serving repositories that left the catalog; their data is
// kept for cfg.Retention (see retain.go).
func (f *Node) removed(ctx context.Context, keys []string) {
	for _, s := range keys {
		k, err := repokey.Parse(s) // a key from the coordinator's removals, checked where it arrives
		if err != nil {
			f.log.Error("coordinator removed an invalid key; skipped", "key", s, "err", err)
			continue
		}
		f.mu.Lock()
		if old, ok := f.view.Del(k); ok {
			f.stale.Move(int64(old.VerifiedAt())*1000, 0)
			f.sorted.Remove(k)
			if old.VerifiedAt() != 0 {
				f.markVerified(k, 0)
			}
		}
		f.plan.Removed(k)
		f.mu.Unlock()
		f.reclass(k)
		remove, msg := f.mirror.Retire, "repository removed from the mirror; its data is kept for a re-addition"
		if f.cfg.Retention <= 0 {
			remove, msg = f.mirror.Remove, "repository removed from the mirror"
		}
		if err := remove(ctx, k); err != nil {
			f.log.Error("remove repository", "key", k, "err", err)
			continue
		}
		f.n.ForgetDigest(k)
		f.log.Info(msg, "key", k, "retention", f.cfg.Retention)
	}
}

// ownSynced notes that this node, as the owner, fetched key itself from
// the upstream with a check that started at start: what it serves is the
// upstream's refs as of then.
func (f *Node) ownSynced(key repokey.Key, start time.Time) {
	f.mu.Lock()
	f.plan.OwnSynced(key, start)
	f.mu.Unlock()
	f.setVerified(key, start)
}

func (f *Node) kick() {
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// nextPull picks the pending key due first that is not being pulled
// (pullplan.Plan.Next), marks it pulling, and says where it comes from
// (pullSource).
func (f *Node) nextPull(now time.Time) (repokey.Key, *fleetv1.RepoState, pullplan.Source, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.plan.Next(now)
	if !ok {
		return "", nil, pullplan.FromOwner, false
	}
	st := f.view.Get(k)
	return k, st, f.pullSource(k, st, now), true
}

func (f *Node) pullLoop(ctx context.Context) {
	for ctx.Err() == nil {
		f.measureDisk()
		key, st, src, ok := f.nextPull(f.clk.Now())
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-f.signal:
			case <-f.clk.After(time.Second):
			}
			continue
		}
		peer := src == pullplan.FromPeer
		if peer && !f.takeMove() {
			f.mu.Lock()
			f.plan.WaitMove(key) // a copy's slot frees it (freeMove)
			f.mu.Unlock()
			continue
		}
		done, ok := f.admit(key)
		if !ok {
			if peer {
				f.freeMove()
			}
			continue
		}
		var err error
		copied := false
		if peer {
			copied, err = f.pullFromPeer(ctx, key, st)
			f.freeMove() // a pull from the owner that follows is not a move
		}
		if !copied && err == nil {
			err = f.pull(ctx, key, st)
		}
		done()
		served, _ := f.n.Digest(key)
		f.mu.Lock()
		f.plan.Serves(key, served, src, f.clk.Now())
		f.plan.Ended(key, st.GetDigest(), pullOutcome(ctx, err), f.clk.Now())
		f.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			f.log.Warn("pull from owner failed; will retry", "key", key, "err", err)
		}
		f.kick()
	}
}

// pullOutcome is how a pull that ended with err went, for the plan: over
// --max-repo-size or --max-refs waits for the owner's next digest, never a
// timer (each try could move as much as the limit); another failure backs
// off (from 2 s, doubling to 30 s: a pull whose upstream check keeps
// failing must not ask the owner and the upstream every 2 s; a new state
// from the coordinator tries at once).
func pullOutcome(ctx context.Context, err error) pullplan.Outcome {
	switch {
	case ctx.Err() != nil:
		return pullplan.Stopped
	case err == nil:
		return pullplan.Pulled
	case node.OverLimit(err):
		return pullplan.OverLimit
	}
	return pullplan.Failed
}

// pull fetches key's new objects from its owner through the owner's tunnel.
func (f *Node) pull(ctx context.Context, key repokey.Key, st *fleetv1.RepoState) error {
	if st == nil {
		return nil // removed meanwhile
	}
	owner := st.GetOwner()
	if owner == f.n.ID() {
		return nil
	}
	if !f.tunnels.Connected(owner) {
		return fmt.Errorf("owner node %d has no tunnel open", owner)
	}
	k := key // checked where its state arrived (states)
	url := fmt.Sprintf("http://%s/%d/%s.git", f.proxyLn.Addr().String(), owner, key)
	start := f.clk.Now()
	f.log.Debug("pulling from owner", "key", key, "owner", owner) // one line per attempt
	had := f.mirror.Has(k)
	res, seen, refused, err := f.pullVerified(ctx, k, st, owner, url)
	f.pulled(node.KindOf(had, res), f.clk.Now().Sub(start), err)
	if refused != nil {
		// The pull is shown refused; what changed came from the upstream.
		f.flog.Append(refusedEntry(key.String(), f.n.ID(), start, refused))
		f.flog.Append(f.n.WorkEntry(key.String(), "check", refused.at, res, nil))
	} else {
		e := f.n.WorkEntry(key.String(), "pull", start, res, err)
		e.From = owner
		f.flog.Append(e)
	}
	if err != nil {
		return err
	}
	f.served(key, res)
	digest := res.After.Digest()
	// The roots the coordinator tells networks by: a full node's, on its
	// served result, are the ones it trusts. They are read before
	// SetDigest, which makes the mirror a candidate for maintenance: a run
	// holds the mirror's lock (a fresh one's, seconds under load), and the
	// pull must not wait behind the run it started.
	roots, rootsErr := f.mirror.Roots(ctx, k, res)
	f.n.SetDigest(key, digest)
	f.afterPull(key, owner, res, seen)
	if res.Changed {
		f.log.Info("pulled from owner", "key", key, "owner", owner, "cloned", res.Cloned, "digest", digest,
			"took", f.clk.Now().Sub(start))
	}
	r := &fleetv1.CheckResult{Key: key.String(), CheckedAtMs: start.UnixMilli(), Ok: true, Served: true,
		Cloned: res.Cloned, Fetched: res.Fetched, Changed: res.Changed, Digest: digest,
		DurationMs: f.clk.Now().Sub(start).Milliseconds()}
	if res.Changed || res.Cloned {
		r.SizeBytes = f.n.MirrorSize(k)
	}
	if rootsErr == nil {
		r.Roots, r.RootsKnown = roots, true
	} else {
		f.log.Warn("could not count the mirror's root commits", "key", key, "err", rootsErr)
	}
	f.n.Report(r)
	return nil
}

// pullNow pulls key from its owner at once (an on-demand check's result).
func (f *Node) pullNow(ctx context.Context, key repokey.Key, digest string) error {
	f.mu.Lock()
	st := f.view.Get(key)
	f.mu.Unlock()
	if st == nil {
		return fmt.Errorf("repository %s is no longer mirrored", key)
	}
	if st.GetOwner() == f.n.ID() {
		return nil // fetched by this node itself
	}
	if elsewhere(st.GetReplicas(), f.n.ID()) {
		return nil // its replicas pull it
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
