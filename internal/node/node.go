// Package node is the runtime that every gitfleet node runs, and all that
// a partial node (a volunteer's machine) runs: the session with the
// coordinator (registration, heartbeats, assignments, results), the checks
// and fetches of the repositories assigned to it, the scheduler's state
// kept across restarts, the disk and its high water, the fetch log of its
// own work (package fetchlog), the background integrity scan of its
// mirrors and their repair, their maintenance, and the tunnels through
// which full nodes pull its mirrors. The full node (package fullnode) owns
// a Node and adds what it does through a Role, set at construction; a
// partial node has the partial role (role.go).
//
// Every connection of a partial node is outbound: it listens on no public
// port (its git reaches upstreams through an egress proxy on loopback, and
// its volunteer reads its status on a Unix socket of mode 0600 in the data
// directory: status.go). What the volunteer says of the machine
// (volunteer.go) bounds it: a cap on its bandwidth, which its downloads
// and uploads share, and active hours, outside which it does no
// background work.
// This package serves no public request, holds no view of the fleet's
// other repositories and decides nothing for the fleet: that is the full
// node's and the coordinator's.
//
// Decisions about time: when each repository is checked is package
// schedule's (fed the node's budget, limits and results). This package
// has its own: the integrity scan's plan (integrityplan.go) and the
// maintenance plan with its duty bound (maintenanceplan.go), pure planners
// fed the clock's time; the volunteer's active hours, which the scheduler,
// the maintenance lanes and the integrity scan wait for (package hours);
// the coordinator session's backoff (session.go, package backoff's rule)
// and its heartbeats; the disk measured at most every 10 s (disk.go); a
// failed repair or an unclean stop's check tried again a minute later
// (integrity.go). Every wait is on the clock the node is built with. The
// full node's are package fullnode's.
//
// Three words that sound alike: the integrity scan (integrity.go) reads
// the mirrors on disk for missing or broken objects; git's fsck checks
// every object a fetch brings (package mirror); and a full node verifies
// a mirror's refs against its upstream (verified_at, package fullnode).
package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gitfleet/gitfleet/internal/atomicfile"
	"github.com/gitfleet/gitfleet/internal/bandwidth"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/hours"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/schedule"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Config configures the runtime of a node (a full node's own settings are
// fullnode.Config's).
type Config struct {
	DataDir string
	Name    string
	// Coordinators are the host:port addresses of the coordinator's gRPC:
	// one, or those of the coordinators that share the fleet (the node
	// finds the leader among them).
	Coordinators []string
	JoinToken    string
	// TLS, when set, is how the node dials the coordinator and full nodes'
	// tunnels; nil: plain TCP.
	TLS *tls.Config
	// Capacity is the placement weight (1 = a standard node; 0 = hold no
	// repositories of its own, only for full nodes).
	Capacity float64
	Fetchers int
	// Budget is background checks per hour (0 = unlimited).
	Budget      float64
	MaxInterval time.Duration
	MinInterval time.Duration
	// FedMaxInterval is the staleness bound of repositories on hosts whose
	// forge feed works (0: the scheduler's default, 7 days).
	FedMaxInterval time.Duration
	// ArchivedInterval is the staleness bound of repositories their forge
	// marks archived (0: the scheduler's default, 30 days).
	ArchivedInterval time.Duration
	Policy           string
	HostLimits       map[string]float64 // checks per hour by host
	// HostConcurrency caps the checks running at once against one host
	// (0: none but Fetchers).
	HostConcurrency int
	// DiskQuota, when set, is the space the node may use for mirrors (its
	// usage is then the size of <data>/repos); otherwise the file system's.
	DiskQuota int64
	// DiskHighWater is the share of the disk above which the node takes no
	// new clones (a partial node hands them back; a full node goes by its
	// full disk policy) (default 0.85).
	DiskHighWater float64
	GitTimeout    time.Duration
	// Limits bound what an upstream can make the node store or spend.
	Limits Limits
	// IntegrityInterval is how often each mirror's integrity is checked in
	// the background (--verify-interval; 0: never).
	IntegrityInterval time.Duration
	// PruneAfter bounds how long a mirror keeps the objects that a fetch
	// which deleted or rewrote refs left unreachable (mirror.SetPruneAfter).
	PruneAfter time.Duration
	// Maintenance of the mirrors (maintenance.go): lanes (0: none), the
	// share of the time each may run, and how often a mirror is
	// repacked in full (dropping what no ref reaches).
	MaintenanceConcurrency  int
	MaintenanceDuty         float64
	MaintenanceFullInterval time.Duration
	// Archive is which mirrors keep the tips that force-pushes and
	// deletions take away, and for how long (mirror.ArchivePolicy; Of
	// is the node's: the catalog's archive attribute).
	Archive mirror.ArchivePolicy
	// Retention is how long the old tips of the refs that an emptied
	// upstream deleted are kept (hidden), and how long a full node keeps a
	// removed repository's data for a re-addition to bring back without a
	// clone.
	Retention time.Duration
	// AllowPrivate accepts upstreams on loopback and private networks.
	AllowPrivate bool
	// Egress is the operator's egress policy (nil: the default that
	// AllowPrivate selects); Resolver answers names for it (nil: the
	// system's). Every upstream connection of git goes through it.
	Egress   *egress.Policy
	Resolver egress.Resolver
	// Fold says which hosts' paths are case-insensitive in keys (the
	// assignments' keys, and a full node's public edge's and webhooks').
	Fold repokey.Folding
	// LogPerRepo and LogMaxAge bound the fetch log (package fetchlog).
	LogPerRepo int
	LogMaxAge  time.Duration
	// Metrics is the process's registry, which the node registers its
	// families on (nil: a registry of its own). A full node serves it at
	// /metrics.
	Metrics metrics.Registry
	// MaxBandwidth is the volunteer's cap on the bytes the node moves a
	// second: its downloads from upstreams and its uploads to full nodes
	// share it (0: none; package bandwidth). git's connections over git://
	// and ssh:// do not go through the egress proxy, and are not paced.
	MaxBandwidth bandwidth.Rate
	// ActiveHours are the volunteer's (nil: always; package hours):
	// outside them the node starts no background check, maintenance or
	// integrity scan, and the coordinator gives it no clones while another
	// node can take them. Urgent checks (first clones, checks asked for)
	// still run, unless DeclineUrgent.
	ActiveHours   *hours.Window
	DeclineUrgent bool
}

// Node is a running node.
type Node struct {
	cfg       Config
	log       *slog.Logger
	clk       clock.Clock
	git       *gitcmd.Runner
	dialer    *egress.Dialer // every upstream connection's policy
	proxy     *egress.Proxy  // git's way to upstreams, through dialer
	mirror    *mirror.Store
	db        store.Store
	sched     *schedule.Scheduler
	role      Role // the partial role, or what a full node adds (role.go)
	reg       Registration
	integrity *integrityScan
	met       *nodeMetrics  // promcollect.go
	flog      *fetchlog.Log // what this node did, persisted (fetchlog.go)
	maint     *maintainer
	bw        *bandwidth.Limiter  // the volunteer's cap (nil: none), on upstreams' reads and tunnels' writes
	traffic   *traffic            // the bytes moved today (volunteer.go)
	packs     *gitserve.PackCache // the tunnels' answers share it (nil: none; SetTunnelCache)
	reads     http.Handler        // what the tunnels answer besides git (nil: nothing; SetTunnelReads)

	runCtx context.Context
	id     uint32
	secret string

	mu          sync.Mutex
	client      fleetv1.CoordinatorClient // set once connected
	owned       map[string]*owned         // repositories this node fetches
	early       map[string][]string       // checks asked for before their repository's assignment arrived (early.go)
	results     map[string]*fleetv1.CheckResult
	sess        *coordSession // current session (nil when disconnected)
	tunnels     map[string]context.CancelFunc
	tunnelWG    sync.WaitGroup // the tunnels' goroutines, waited for by Run
	wakeup      chan struct{}
	sendNow     chan struct{}
	digests     map[repokey.Key]string // key -> digest of the local mirror
	fedHosts    map[string]bool        // hosts whose forge feed works, as the coordinator says; under mu
	meta        map[string]*repoMeta
	budgetShort atomic.Bool  // the budget cannot cover --max-interval
	heartbeatMs atomic.Int64 // the coordinator's heartbeat interval
	leaderless  atomic.Bool  // a coordinator said it knows no leader (Session)
	handBack    []string     // keys to hand back on the session
	diskMu      sync.Mutex
	diskAt      time.Time // when diskUsed was measured
	diskUsed    uint64
	cloning     int // clones under way (guarded by diskMu)
	diskHeld    int // mirrors held when diskUsed was measured (guarded by diskMu)
	metaDirty   map[repokey.Key]bool
	running     map[string]*runningCheck // checks in progress, by key (guarded by mu; checkcancel.go)

	// What the node keeps beside its mirrors when diskUsed was measured
	// (guarded by diskMu; diskbeside.go).
	diskBesides uint64

	// What the coordinator told of the node (volunteer.go): the fleet's
	// size with the last Assign, and what the fleet holds against the
	// node (guarded by mu).
	fleetRepos atomic.Uint32
	standing   Standing
}

type owned struct {
	key       repokey.Key // parsed once, from the Repo that assigned it
	url       string
	fallbacks []string
	taskIDs   []string // on-demand checks waiting for the next check
	seedURL   string   // a full node's copy to clone from first
	network   string   // the object pool it shares history in (Repo.network; "" standalone)
	archive   bool     // keeps the tips rewrites take away (Repo.archive)
}

// identity is what a node keeps of its registration.
type identity struct {
	NodeID uint32 `json:"node_id"`
	Secret string `json:"secret"`
}

// New prepares a node's data directory. role makes the role of the node
// once the runtime is built (nil: a partial node); it is called once,
// before New returns.
func New(cfg Config, log *slog.Logger, clk clock.Clock, role func(*Node) (Role, error)) (*Node, error) {
	if len(cfg.Coordinators) == 0 {
		return nil, errors.New("node: the coordinator's address is required (--coordinator)")
	}
	if cfg.Fetchers <= 0 {
		cfg.Fetchers = config.DefaultFetchers
	}
	if cfg.DiskHighWater <= 0 || cfg.DiskHighWater > 1 {
		cfg.DiskHighWater = 0.85
	}
	if cfg.GitTimeout <= 0 {
		cfg.GitTimeout = config.DefaultGitTimeout
	}
	if cfg.Name == "" {
		h, _ := os.Hostname()
		cfg.Name = h
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewRegistry()
	}
	met := newNodeMetrics(cfg.Metrics)
	// git reaches upstreams through the egress proxy only, its connections
	// counted as bytes fetched, and today's, and paced by the volunteer's
	// cap.
	bw, today := bandwidth.NewLimiter(cfg.MaxBandwidth), newTraffic(clk, cfg.zone())
	dialer := egressDialer(cfg)
	counted := *dialer
	fetched := met.addFetched("upstream")
	counted.Received = func(b int) { fetched(b); today.add(false, b) }
	counted.Limit = bw
	proxy, err := egress.NewProxy(&counted, log)
	if err != nil {
		return nil, err
	}
	git := gitRunner(gitcmd.Through(proxy), cfg.GitTimeout, cfg.Limits, mirror.TempDir(cfg.DataDir), log)
	// HEAD is asked at least every half --max-interval while no ref moves,
	// so a repository checked every --max-interval asks at every check.
	ms, err := mirror.Open(cfg.DataDir, git, log, mirror.WithClock(clk), mirror.WithHeadRecheck(cfg.MaxInterval/2))
	if err != nil {
		proxy.Close()
		return nil, err
	}
	ms.SetLimits(cfg.Limits.mirror())
	ms.SetPruneAfter(cfg.PruneAfter)
	// A source's emptiness is believed no sooner than a background check
	// would come again, and never within the hour (mirror.emptyGuard).
	ms.SetEmptyConfirmAfter(max(cfg.MinInterval, mirror.DefaultEmptyConfirmAfter))
	ms.SetTombstonePeriod(cfg.Retention)
	bolt, err := store.OpenBolt(filepath.Join(cfg.DataDir, "node.db"))
	if err != nil {
		ms.Close()
		proxy.Close()
		return nil, fmt.Errorf("node: %w", err)
	}
	db := metrics.TimeStore(bolt, metrics.StoreWrites(cfg.Metrics), "node", "bolt")
	sched, err := schedule.New(schedule.Config{Policy: cfg.Policy, Budget: cfg.Budget, Concurrency: cfg.Fetchers,
		MaxInterval: cfg.MaxInterval, MinInterval: cfg.MinInterval, FedMaxInterval: cfg.FedMaxInterval, ArchivedInterval: cfg.ArchivedInterval, HostLimits: cfg.HostLimits,
		HostConcurrency: cfg.HostConcurrency, Hours: cfg.ActiveHours, DeclineUrgent: cfg.DeclineUrgent}, clk)
	if err != nil {
		db.Close()
		ms.Close()
		proxy.Close()
		return nil, fmt.Errorf("node: scheduler: %w", err)
	}
	n := &Node{cfg: cfg, log: log, clk: clk, git: git, dialer: dialer, proxy: proxy, met: met, mirror: ms, db: db, sched: sched,
		owned: map[string]*owned{}, early: map[string][]string{}, results: map[string]*fleetv1.CheckResult{}, tunnels: map[string]context.CancelFunc{},
		wakeup: make(chan struct{}, 1), sendNow: make(chan struct{}, 1), digests: map[repokey.Key]string{},
		meta: map[string]*repoMeta{}, metaDirty: map[repokey.Key]bool{}, integrity: newIntegrityScan(cfg.IntegrityInterval),
		flog:  fetchlog.New(logDB{db, bolt}, fetchlog.Config{PerRepo: cfg.LogPerRepo, MaxAge: cfg.LogMaxAge}, clk, log),
		maint: newMaintainer(cfg.MaintenanceConcurrency, cfg.MaintenanceDuty, cfg.MaintenanceFullInterval),
		bw:    bw, traffic: today}
	archive := cfg.Archive
	archive.Of = n.archives
	ms.SetArchive(archive)
	n.role = partial{n}
	if role != nil {
		if n.role, err = role(n); err != nil {
			db.Close()
			ms.Close()
			proxy.Close()
			return nil, err
		}
	}
	n.reg = n.role.Registration()
	n.integrity.changed = n.role.Changed
	cfg.Metrics.MustRegister(&nodeCollector{n: n}, maintenanceCollector{n.maint})
	return n, nil
}

func (n *Node) loadIdentity() error {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, "node.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node: read identity: %w", err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil {
		return fmt.Errorf("node: %s is damaged (delete it to register as a new node): %w", filepath.Join(n.cfg.DataDir, "node.json"), err)
	}
	n.id, n.secret = id.NodeID, id.Secret
	return nil
}

func (n *Node) saveIdentity() error {
	b, _ := json.Marshal(identity{NodeID: n.id, Secret: n.secret})
	if err := atomicfile.Write(filepath.Join(n.cfg.DataDir, "node.json"), b, 0o600); err != nil {
		return fmt.Errorf("node: save identity: %w", err)
	}
	return nil
}

// tunnelProof proves to a full node that the tunnel comes from this node:
// it is derived from the node's own secret.
func tunnelProof(secret string, id uint32) string {
	return fleetv1.TunnelProof(fleetv1.SecretHash(secret), id)
}

// Run runs the node until ctx ends.
func (n *Node) Run(ctx context.Context) error {
	defer n.mirror.Close()
	defer n.db.Close()
	defer n.proxy.Close()
	if err := n.loadIdentity(); err != nil {
		return err
	}
	if err := n.traffic.load(ctx, n.db); err != nil {
		n.log.Warn("today's traffic could not be read; it is counted from now", "err", err)
	}

	stored, err := n.loadDigests(ctx)
	if err != nil {
		return err
	}
	if err := n.loadMeta(ctx); err != nil {
		return err
	}
	keys, err := n.mirror.Scan()
	if err != nil {
		return err
	}
	n.log.Info("node starting", "mode", roleName(n.reg.Mode), "data", n.cfg.DataDir, "mirrors_on_disk", len(keys),
		"clean_start", n.mirror.CleanStart())
	// The role's own state and listeners: a port that is taken fails the
	// start at once.
	if err := n.role.Start(ctx); err != nil {
		return err
	}
	n.reg = n.role.Registration() // its addresses are known now
	unchecked := n.holdUnchecked()
	// The mirrors on disk are the ones held, by the keys the mirror store
	// read from their directories: a stored digest counts for a mirror
	// that is still there, and the store's keys are not trusted as keys.
	held := make(map[repokey.Key]bool, len(keys))
	for _, k := range keys {
		held[k] = true
	}
	n.mu.Lock()
	for k := range n.digests {
		if !held[k] {
			delete(n.digests, k) // a mirror that is gone from disk
		}
	}
	for _, k := range keys {
		if _, ok := n.digests[k]; !ok {
			n.digests[k] = stored[k.String()] // "" when unknown: the first check will tell
		}
	}
	n.mu.Unlock()

	statusLn, err := listenStatus(n.cfg.DataDir)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.runCtx = ctx
	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	errc := make(chan error, 2)
	run(func(ctx context.Context) {
		if err := n.role.Serve(ctx); err != nil {
			errc <- err
		}
	})
	run(func(ctx context.Context) { n.serveStatus(ctx, statusLn) })
	run(n.fetchLoop)
	run(n.persistLoop)
	run(n.flog.Run)
	run(n.mirror.RunPruner)
	if len(unchecked) > 0 {
		run(func(ctx context.Context) { n.checkAfterCrash(ctx, unchecked) })
	}
	if n.cfg.IntegrityInterval > 0 {
		run(n.integrityLoop)
	}
	for range n.maint.lanes {
		run(n.maintainLoop)
	}
	run(func(ctx context.Context) {
		if err := n.coordinatorLoop(ctx); err != nil {
			errc <- err
		}
	})
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	cancel()
	wg.Wait() // the loops, the session and the role's work: nothing uses the store after
	n.stopTunnels()
	n.tunnelWG.Wait()
	if err := n.flog.Flush(context.Background()); err != nil {
		n.log.Warn("fetch log: last write failed", "err", err)
	}
	n.writeLastStatus()
	// Every loop that writes mirrors has ended (wg.Wait).
	if err := n.mirror.MarkCleanStop(); err != nil {
		n.log.Warn("could not record the clean stop: the next start checks the mirrors written last", "err", err)
	}
	return runErr
}

const bucketDigests = "digests"

// loadDigests reads the stored digests, by the key as written: Run keeps
// those of the mirrors on disk.
func (n *Node) loadDigests(ctx context.Context) (map[string]string, error) {
	stored := map[string]string{}
	err := n.db.Scan(ctx, bucketDigests, "", func(k string, v []byte) error {
		stored[k] = string(v)
		return nil
	})
	return stored, err
}

// SetDigest records the digest of the refs of key's mirror, which the
// node holds (a check, a pull, a repair wrote it).
func (n *Node) SetDigest(key repokey.Key, digest string) {
	n.mu.Lock()
	n.digests[key] = digest
	n.mu.Unlock()
	n.maint.note(key) // written to: a candidate for maintenance
	n.role.Changed(key)
	if err := n.db.Put(context.Background(), bucketDigests, key.String(), []byte(digest)); err != nil {
		n.log.Warn("store digest", "key", key, "err", err)
	}
}

// ForgetDigest records that the node no longer holds key's mirror.
func (n *Node) ForgetDigest(key repokey.Key) {
	n.mu.Lock()
	delete(n.digests, key)
	n.mu.Unlock()
	n.role.Changed(key)
	if err := n.db.Delete(context.Background(), bucketDigests, key.String()); err != nil {
		n.log.Warn("delete digest", "key", key, "err", err)
	}
}

// Digest returns the digest of key's mirror ("" while unknown), and
// whether the node holds one.
func (n *Node) Digest(key repokey.Key) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d, ok := n.digests[key]
	return d, ok
}

// logDB is what the fetch log writes through (the store, its writes timed)
// and reads from (the bolt database's ordered scans).
type logDB struct {
	store.Store
	bolt *store.Bolt
}

func (d logDB) ScanFrom(ctx context.Context, bucket, prefix, start string, fn func(key string, value []byte) error) error {
	return d.bolt.ScanFrom(ctx, bucket, prefix, start, fn)
}
