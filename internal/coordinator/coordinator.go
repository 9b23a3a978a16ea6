// Package coordinator is the fleet's lightweight public coordinator. It reads
// the catalog, keeps the membership of nodes, decides which node mirrors
// which repository, and tells nodes about changes over their gRPC sessions.
// It never moves repository data.
//
// Its decisions are taken by pure packages that it feeds with events and
// whose answers it carries out: membership (which nodes are alive, suspect
// or gone, and the ID a new node gets), placement (which node holds which
// repository, over ring's consistent hashing) and feedplan (which
// repositories the forges' change feeds ask about). Package catalog is not
// one of them: it runs git to read the catalog repository and diff its
// commits. This package is the shell around them: sessions, timers,
// persistence, and its Prometheus figures (metrics.go). Two rules are its
// own: who may register (admit, credentials.go) and when a catalog
// change's removals are held (purge protection, purge.go).
package coordinator

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/intern"
	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/network"
	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/ring"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Config configures a coordinator.
type Config struct {
	DataDir         string
	Catalog         string        // path or URL of the catalog repository
	CatalogInterval time.Duration // config.DefaultCatalogInterval when zero
	// ListerInterval is how often a lister's owner is listed again
	// (config.DefaultListerInterval when zero).
	ListerInterval time.Duration
	// JoinToken admits new partial nodes: one token, or several separated
	// by commas (an overlap while it is rotated). FullToken admits full
	// nodes; empty: none.
	JoinToken         string
	FullToken         string
	Grace             time.Duration
	Warmup            time.Duration
	WarmupNodes       int
	HeartbeatInterval time.Duration
	AllowPrivate      bool
	// Egress, when set, is the operator's egress policy, which URLs added
	// by API or catalog are checked against (the nodes enforce it).
	Egress *egress.Policy
	// Fold says which hosts' paths are case-insensitive in keys.
	Fold repokey.Folding
	// Feeds configures the forges' change feeds (feed.go), which the
	// leader runs.
	Feeds FeedConfig
	// BatchSize bounds the repositories in one Assign, Drop or RepoStates message.
	BatchSize int
	// FullReplicas is the number of full nodes that hold each repository
	// (its fork network as one unit) on the full tier
	// (placement.DefaultReplicas if <= 0).
	FullReplicas int
	// LoadFactor bounds a node's repositories to this many times its fair
	// share; MaxClonesInFlight bounds the clones a node is asked to make at
	// once (both: the placement engine's defaults when zero).
	LoadFactor        float64
	MaxClonesInFlight int
	// MaxPurgeShare is the largest share of all repositories that catalog
	// changes may remove within PurgeWindow without an operator's
	// confirmation; removals beyond it are held (config.DefaultMaxPurge
	// when zero).
	MaxPurgeShare float64
	// PurgeWindow is the sliding window over which removals are counted
	// against MaxPurgeShare (default 24 hours).
	PurgeWindow time.Duration
	// TLS, when set, is the configuration of the gRPC listener (see Serve).
	TLS *tls.Config
	// Store, when set, is where the state is kept (the shared etcd state of
	// an elected leader); nil: a bbolt file in DataDir.
	Store store.Store
	// BulkLoad, when set, is called when a whole catalog is about to be
	// loaded and placed (at start), and the function it returns when that
	// is done. Most of what the coordinator will hold is allocated in
	// between: the binary uses it to pace the garbage collector.
	BulkLoad func() (done func())
	// PrepareHeap, when set, is called when a whole catalog of about
	// catalogBytes bytes is about to be read (listed, nothing read yet),
	// within a BulkLoad: the binary has the memory it will take backed in
	// one call rather than page by page, and returns how many bytes it
	// backed (0: none).
	PrepareHeap func(catalogBytes int64) (backed int64)
	// Metrics is the process's registry, which Serve and ServeElected
	// register the coordinator's families on (nil: a registry of its own).
	Metrics metrics.Registry
	met     *coordMetrics // made once per process (metrics.go)
}

// Coordinator is the running coordinator. Create it with New, serve its
// gRPC service, and call Run.
type Coordinator struct {
	fleetv1.UnimplementedCoordinatorServer

	// feeds are the forges' change feeds by host, while Run runs them
	// (feed.go); under mu.
	feeds map[string]*feedHost

	cfg        Config
	joinTokens []string // cfg.JoinToken's list
	log        *slog.Logger
	clk        clock.Clock
	db         store.Store
	git        *gitcmd.Runner
	src        *catalog.Source
	flush      chan struct{}

	mu      sync.Mutex
	cat     *catalog.Catalog
	table   *membership.Table
	engine  *placement.Engine
	nets    *network.Networks // fork networks (network.go), fed to engine
	members []ring.Member     // last given to the engine
	// The full tier (tier.go): its placement, whether it holds the
	// units and which changed since, the full nodes' weights last known,
	// and whether it changed since the last persist.
	tier        *placement.Tier
	tierFed     bool                // the tier was given every unit
	tierTouched map[string]struct{} // units changed since the last sync
	tierWeight  map[uint32]float64
	tierDirty   bool
	tierShares  *tierShares // the API's figures of the tier, nil when the tier changed since
	// tierDropsAway are the tier's drops decided for full nodes with no
	// session, by node: sent when the node's next session opens.
	tierDropsAway map[uint32]map[repokey.Key]bool
	// replicaDiffs are the replicas whose state is not the recorded one,
	// by key (replicastate.go); most repositories have none.
	replicaDiffs map[repokey.Key][]replicaDiff
	// tierMembersDirty: the membership or a full node's disk changed
	// since the tier's members were last computed.
	tierMembersDirty bool
	placing          bool
	status           map[repokey.Key]*repoStatus // repositories that have been checked at least once
	errs             *intern.Templates           // their errors' shared texts (repoStatus.setError)
	heads            map[string]string           // HEAD's branch names, one copy each (headName)
	forgeFlags       map[repokey.Key]forgeFlag   // what the feeds' forges mark archived or disabled (forgeflags.go)
	renames          map[repokey.Key]rename      // repositories renamed upstream (renames.go)
	forgeIDs         map[repokey.Key]int64       // the forges' stable numbers of repositories, where a feed saw them (renames.go)
	nodes            map[uint32]*nodeRecord
	sessions         map[uint32]*session
	dirty            map[repokey.Key]bool // repos to persist (false: delete)
	meta             map[string]string    // meta values to persist
	forget           []uint32             // forgotten nodes to delete from the store
	// memberDirty says the membership table changed since the last persist;
	// placeDirty, the placement engine.
	memberDirty, placeDirty bool
	removals                removalWindow             // removals applied within the purge window
	held                    map[repokey.Key]heldEntry // removals held by purge protection
	heldCommit              string                    // the latest catalog commit that held removals
	problems                int                       // catalog entries skipped
	problemLines            []string                  // the first of them, "file:line: reason"
	overlay                 map[repokey.Key]overlay   // API additions and removals
	overlayDirty            map[repokey.Key]bool
	// listings are the listers' last good listings, by pattern
	// (lister.go); listingDirty those to persist, listerRuns what is
	// known of the listers that failed since.
	listings     map[string]*listing
	listingDirty map[string]bool
	listerRuns   map[string]*listerRun
	listerWake   chan struct{}
	tasks        map[string]pendingTask // on-demand checks -> the full node that asked

	// catalogErr is why the catalog cannot be read, since catalogErrAt
	// (the first failure in a row); "" once a refresh succeeds.
	catalogErr   string
	catalogClass repostate.Class // catalogErr's
	catalogErrAt time.Time
	// The catalog's last fetch and the next one planned (CatalogStatus).
	catalogFetchAt, catalogNextAt time.Time

	// standing is what each full node counted against each node
	// (standing.go): node -> full node -> counts; not persisted, as the
	// full nodes' counts are not.
	standing map[uint32]map[uint32]counts
}

type nodeRecord struct {
	ID         uint32
	Name       string
	SecretHash string
	Mode       fleetv1.Mode
	Capacity   float64
	TunnelAddr string `json:",omitempty"`
	PublicURL  string `json:",omitempty"`
	// What the volunteer set: a cap in bytes per second (0: none), and
	// active hours as the node wrote them ("": always).
	MaxBandwidth uint64 `json:",omitempty"`
	ActiveHours  string `json:",omitempty"`
	// FullGranted: registered as full with the full token. A record
	// stored before full tokens existed lacks it and proves it again.
	FullGranted bool `json:",omitempty"`
	// A revoked node keeps its ID (never reused) and is refused.
	Revoked       bool   `json:",omitempty"`
	RevokedReason string `json:",omitempty"`
	RevokedAtMs   int64  `json:",omitempty"`
}

type pendingPurge struct {
	commit  string
	removed int
	total   int
	keys    []string
}

// Buckets of the store.
const (
	bucketMeta  = "meta"
	bucketNodes = "nodes"
	bucketRepos = "repos"
)

// storedKey is the Key of a key the coordinator wrote itself from a Key it
// had parsed: read back from its own store (a repository's state, the
// API's overlay, a held removal), or the name of a repository's unit on
// the full tier (tierUnit's, or the tier's stored snapshot's). The store
// is its own (its data directory, or etcd shared with the other
// coordinators only), not a message from a peer; so a restart does not
// parse a million keys again. TestNoKeyIsMadeFromAnUncheckedString names
// it as the one conversion outside package repokey.
func storedKey(s string) repokey.Key { return repokey.Key(s) }

// Check tells whether a coordinator can start with cfg, as New would,
// without opening anything: a process that runs several roles checks each
// before it starts any.
func (cfg Config) Check() error {
	if len(splitTokens(cfg.JoinToken)) == 0 {
		return errors.New("coordinator: a join token is required (--join-token)")
	}
	if cfg.Catalog == "" {
		return errors.New("coordinator: a catalog is required (--catalog PATH_OR_URL)")
	}
	if cfg.FullReplicas < 0 {
		return fmt.Errorf("coordinator: --full-replicas %d: want 1 or more", cfg.FullReplicas)
	}
	return nil
}

// New opens the coordinator's state in cfg.DataDir. A coordinator with
// stored state resumes from it; one without waits for nodes (warm-up).
func New(ctx context.Context, cfg Config, log *slog.Logger, clk clock.Clock) (*Coordinator, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.CatalogInterval <= 0 {
		cfg.CatalogInterval = config.DefaultCatalogInterval
	}
	if cfg.ListerInterval <= 0 {
		cfg.ListerInterval = config.DefaultListerInterval
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = config.DefaultHeartbeat
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = config.DefaultAssignBatch
	}
	if cfg.MaxPurgeShare <= 0 {
		cfg.MaxPurgeShare = config.DefaultMaxPurge
	}
	if cfg.PurgeWindow <= 0 {
		cfg.PurgeWindow = config.DefaultPurgeWindow
	}
	if cfg.met == nil {
		cfg.met = newCoordMetrics(cfg.Metrics)
	}
	var db store.Store
	if cfg.Store != nil {
		db = metrics.TimeStore(cfg.Store, cfg.met.storeWrites, "coordinator", "etcd")
	} else {
		bolt, err := store.OpenBolt(filepath.Join(cfg.DataDir, "coordinator.db"))
		if err != nil {
			return nil, fmt.Errorf("coordinator: %w", err)
		}
		db = metrics.TimeStore(bolt, cfg.met.storeWrites, "coordinator", "bolt")
	}
	tmp, err := catalog.CleanTempDir(cfg.DataDir)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	git := catalog.SourceGit(10*time.Minute, tmp)
	c := &Coordinator{
		cfg:           cfg,
		joinTokens:    splitTokens(cfg.JoinToken),
		log:           log,
		clk:           clk,
		db:            db,
		git:           git,
		flush:         make(chan struct{}, 1),
		status:        make(map[repokey.Key]*repoStatus),
		errs:          intern.New(1 << 16),
		heads:         make(map[string]string),
		forgeFlags:    make(map[repokey.Key]forgeFlag),
		renames:       make(map[repokey.Key]rename),
		forgeIDs:      make(map[repokey.Key]int64),
		nodes:         make(map[uint32]*nodeRecord),
		sessions:      make(map[uint32]*session),
		dirty:         make(map[repokey.Key]bool),
		meta:          make(map[string]string),
		overlay:       make(map[repokey.Key]overlay),
		overlayDirty:  make(map[repokey.Key]bool),
		listings:      make(map[string]*listing),
		listingDirty:  make(map[string]bool),
		listerRuns:    make(map[string]*listerRun),
		listerWake:    make(chan struct{}, 1),
		tasks:         make(map[string]pendingTask),
		held:          make(map[repokey.Key]heldEntry),
		tierWeight:    make(map[uint32]float64),
		tierTouched:   make(map[string]struct{}),
		tierDropsAway: make(map[uint32]map[repokey.Key]bool),
		replicaDiffs:  make(map[repokey.Key][]replicaDiff),
	}
	c.src, err = catalog.OpenSource(cfg.DataDir, cfg.Catalog, c.git, log)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("coordinator: catalog: %w", err)
	}
	if err := c.restore(ctx); err != nil {
		db.Close()
		return nil, err
	}
	cfg.met.leads(c)
	return c, nil
}

func (c *Coordinator) memberConfig() membership.Config {
	mc := membership.DefaultConfig()
	if c.cfg.Grace > 0 {
		mc.Grace = c.cfg.Grace
	}
	if c.cfg.Warmup > 0 {
		mc.Warmup = c.cfg.Warmup
	}
	mc.WarmupNodes = c.cfg.WarmupNodes
	mc.HeartbeatTimeout = 3 * c.cfg.HeartbeatInterval
	return mc
}

// restore loads nodes, membership, repository states and the catalog
// commit last applied.
func (c *Coordinator) restore(ctx context.Context) error {
	now := c.clk.Now()
	snap, ok, err := c.readMeta(ctx, "membership", "the membership of the fleet")
	if err != nil {
		return err
	}
	if ok {
		c.table, err = membership.Restore(c.memberConfig(), snap, now)
		if err != nil {
			return fmt.Errorf("coordinator: restore membership: %w", err)
		}
		c.placing = true
	} else {
		c.table = membership.New(c.memberConfig(), now)
	}
	err = c.db.Scan(ctx, bucketNodes, "", func(_ string, v []byte) error {
		var n nodeRecord
		if err := json.Unmarshal(v, &n); err != nil {
			return err
		}
		c.nodes[n.ID] = &n
		return nil
	})
	if err != nil {
		return fmt.Errorf("coordinator: restore nodes: %w", err)
	}
	if err := c.loadOverlay(ctx); err != nil {
		return fmt.Errorf("coordinator: restore overlay: %w", err)
	}
	held, _, err := c.readMeta(ctx, metaHeld, "the removals that purge protection holds")
	if err != nil {
		return err
	}
	window, _, err := c.readMeta(ctx, metaRemoval, "the removals that purge protection counted")
	if err != nil {
		return err
	}
	if err := c.restorePurge(held, window); err != nil {
		return fmt.Errorf("coordinator: restore purge protection: %w", err)
	}
	commit, ok, err := c.readMeta(ctx, "catalog_commit", "the catalog commit last applied")
	if err != nil {
		return err
	}
	defer c.bulkLoad()()
	if ok {
		cat, err := catalog.Load(ctx, c.git, c.src.Dir(), string(commit), c.catalogOptions())
		if err != nil {
			// A coordinator taking over from another one (or whose clone
			// was lost) has not fetched that commit yet.
			if _, ferr := c.src.Fetch(ctx); ferr == nil {
				cat, err = catalog.Load(ctx, c.git, c.src.Dir(), string(commit), c.catalogOptions())
			}
		}
		if err != nil {
			c.log.Warn("restore: stored catalog commit unreadable, reloading from the remote", "commit", string(commit), "err", err)
		} else {
			if err := c.restoreListings(ctx); err != nil {
				return fmt.Errorf("coordinator: restore the listers' listings: %w", err)
			}
			c.forgetListings(cat)
			cat = cat.AddListings(c.listedRepos())
			c.cat = cat
			c.setProblems(cat.Problems())
			c.unhold(c.listed(slices.Collect(maps.Keys(c.held)))) // listed (and accepted) again
		}
	}
	// The repositories' states, read before the engine: the roots they
	// hold make the fork networks, which the placement was taken with.
	var stored []storedStatus
	var netEntries []network.Entry
	declared := c.declaredNetworks()
	err = c.db.Scan(ctx, bucketRepos, "", func(s string, v []byte) error {
		var r statusRecord
		if err := json.Unmarshal(v, &r); err != nil {
			c.log.Warn("restore: skip unreadable repository state", "key", s, "err", err)
		}
		k := storedKey(s)
		stored = append(stored, storedStatus{k, r})
		if len(r.Roots) > 0 || r.Network != "" || r.Parent != "" {
			netEntries = append(netEntries, network.Entry{Key: k, Roots: r.Roots, Network: r.Network, Parent: storedKey(r.Parent), Declared: declared[k]})
			delete(declared, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("coordinator: restore repositories: %w", err)
	}
	for k, name := range declared {
		netEntries = append(netEntries, network.Entry{Key: k, Declared: name})
	}
	c.nets = network.Restore(netEntries)
	nets := networkMap(c.nets)
	// The placement engine's key set: the catalog at the stored commit
	// with the API's overlay.
	keys := c.effectiveKeys()
	pcfg := placement.Config{LoadFactor: c.cfg.LoadFactor, MaxInFlight: c.cfg.MaxClonesInFlight}
	snap, ok, err = c.readMeta(ctx, "placement", "the placement of the repositories")
	if err != nil {
		return err
	}
	refused, err := c.refusedEntries(ctx)
	if err != nil {
		return fmt.Errorf("coordinator: restore: %w", err)
	}
	wasPlaced := func(cands []repokey.Key) []repokey.Key {
		// The stored placement names its key set by a digest: the refused
		// entries were all placed if it is the set with them. Without it,
		// those that were checked were placed.
		if ok {
			if _, err := placement.RestoreNetworks(pcfg, snap, slices.Concat(keys, cands), nets); err == nil {
				return cands
			}
		}
		checked := make(map[repokey.Key]bool, len(cands))
		for _, s := range stored {
			if _, ok := refused[s.key]; ok {
				checked[s.key] = true
			}
		}
		return slices.DeleteFunc(cands, func(k repokey.Key) bool { return !checked[k] })
	}
	if removed := c.holdRefused(refused, keys, wasPlaced); len(removed) > 0 {
		stored = slices.DeleteFunc(stored, func(s storedStatus) bool {
			if _, gone := refused[s.key]; gone {
				c.dirty[s.key] = false
				return true
			}
			return false
		})
	}
	keys = c.effectiveKeys() // with the removals held
	if ok {
		c.engine, err = placement.RestoreNetworks(pcfg, snap, keys, nets)
		if err != nil {
			// Fall back to a warm-up: the nodes' inventories say who holds what.
			c.log.Warn("restore: stored placement does not match the stored repositories; warming up again", "err", err)
			c.placing = false
		}
	}
	if c.engine == nil {
		c.engine = placement.New(pcfg)
		c.engine.SetNetworks(nets)
		c.engine.AddKeys(keys...)
	}
	for _, st := range stored {
		c.engine.SetSize(st.key, st.rec.Size) // the tier weighs units by them
	}
	if err := c.restoreTier(ctx); err != nil {
		return err
	}
	// Statuses last: their keys are the engine's copies where it has them.
	for _, st := range stored {
		k := st.key
		if ek, ok := c.engine.Key(k.String()); ok {
			k = ek
		}
		s := st.rec.status(c.errs, k)
		c.status[k] = &s
	}
	c.log.Info("coordinator state restored", "nodes", len(c.nodes), "repos", c.engine.Len(), "placing", c.placing)
	return nil
}

// storedStatus is a repository's stored state, as restore reads it.
type storedStatus struct {
	key repokey.Key
	rec statusRecord
}

// readMeta reads key of the meta bucket, which holds what, for restore. A
// failed read is an error, never taken for a missing key: a coordinator
// that started without its held removals or its removal window would apply
// the removals that purge protection holds, and one without its placement
// would place every repository afresh. So it does not start, and says so
// (an elected leader resigns, and a term tries again).
func (c *Coordinator) readMeta(ctx context.Context, key, what string) ([]byte, bool, error) {
	v, ok, err := c.db.Get(ctx, bucketMeta, key)
	if err != nil {
		c.log.Error("restore: cannot read the stored state; not starting rather than starting without it", "key", key, "what", what, "err", err)
		return nil, false, fmt.Errorf("coordinator: restore: read %s (%s/%s): %w", what, bucketMeta, key, err)
	}
	return v, ok, nil
}

// bulkLoad calls cfg.BulkLoad, if set, and returns its done function.
func (c *Coordinator) bulkLoad() (done func()) {
	if c.cfg.BulkLoad == nil {
		return func() {}
	}
	return c.cfg.BulkLoad()
}

func (c *Coordinator) catalogOptions() catalog.Options {
	opt := catalog.Options{AllowPrivate: c.cfg.AllowPrivate, Egress: c.cfg.Egress, Fold: c.cfg.Fold, Log: c.log}
	if c.cfg.PrepareHeap != nil {
		opt.Prepare = func(size int64) {
			began := time.Now()
			if backed := c.cfg.PrepareHeap(size); backed > 0 {
				c.log.Info("memory backed for the catalog", "catalog_bytes", size, "backed_bytes", backed,
					"took_ms", time.Since(began).Milliseconds())
			}
		}
	}
	return opt
}

// Close releases the store.
func (c *Coordinator) Close() error {
	c.cfg.met.stepsDown(c)
	return c.db.Close()
}

// Run refreshes the catalog, runs the membership timers and persists state
// until ctx ends. It then persists what changed since the last time, and
// returns that persist's error: the changes that were not stored.
func (c *Coordinator) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	feeds := c.startFeeds() // before the listers, which use their clients
	wg.Add(5)
	go func() { defer wg.Done(); c.runFeeds(ctx, feeds) }()
	go func() { defer wg.Done(); c.listerLoop(ctx) }()
	go func() { defer wg.Done(); c.catalogLoop(ctx) }()
	go func() { defer wg.Done(); c.membershipLoop(ctx) }()
	go func() { defer wg.Done(); c.persistLoop(ctx) }()
	wg.Wait()
	return c.persist(context.Background())
}

func (c *Coordinator) catalogLoop(ctx context.Context) {
	for {
		err := c.RefreshCatalog(ctx)
		if ctx.Err() == nil {
			c.cfg.met.refreshed(err)
		}
		if err != nil && ctx.Err() == nil {
			if commit := c.catalogCommit(); commit != "" {
				c.log.Error("catalog refresh failed; keeping the last good catalog", "commit", commit, "err", err)
			} else {
				c.log.Error("the catalog cannot be read: no repositories until it can (check --catalog)", "catalog", repokey.Redact(c.cfg.Catalog), "err", err)
			}
		}
		c.mu.Lock()
		c.catalogNextAt = c.clk.Now().Add(c.cfg.CatalogInterval)
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-c.clk.After(c.cfg.CatalogInterval):
		}
	}
}

// catalogCommit is the commit of the catalog applied, "" if none.
func (c *Coordinator) catalogCommit() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cat == nil {
		return ""
	}
	return c.cat.Commit()
}

// RefreshCatalog fetches the catalog and applies what changed. A failure
// is the catalog's error (CatalogStatus) until a refresh succeeds.
func (c *Coordinator) RefreshCatalog(ctx context.Context) error {
	at := c.clk.Now()
	err := c.refreshCatalog(ctx)
	if ctx.Err() != nil {
		return err // stopped, not a fault of the catalog
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.catalogFetchAt = at
	switch {
	case err == nil:
		c.catalogErr, c.catalogClass, c.catalogErrAt = "", repostate.NoClass, time.Time{}
	case c.catalogErr == "":
		c.catalogErrAt = at
		fallthrough
	default:
		c.catalogErr, c.catalogClass = repokey.Redact(err.Error()), gitcmd.ClassOf(err).Public() // the latest reason, since the first failure
	}
	return err
}

func (c *Coordinator) refreshCatalog(ctx context.Context) error {
	commit, err := c.src.Fetch(ctx)
	if err != nil {
		return fmt.Errorf("fetch catalog: %w", err)
	}
	c.mu.Lock()
	old := c.cat
	c.mu.Unlock()
	if old != nil && old.Commit() == commit {
		return nil
	}
	began := time.Now() // for the log: how long reading and placing took
	var next *catalog.Catalog
	var added, removed, changed []repokey.Key
	listersAdded := false
	if old == nil {
		defer c.bulkLoad()()
		next, err = catalog.Load(ctx, c.git, c.src.Dir(), commit, c.catalogOptions())
		if err != nil {
			return fmt.Errorf("load catalog %s: %w", commit, err)
		}
	} else {
		var delta catalog.Delta
		next, delta, err = old.Update(ctx, c.git, c.src.Dir(), commit)
		if err != nil {
			return fmt.Errorf("update catalog to %s: %w", commit, err)
		}
		listersAdded = len(delta.ListersAdded) > 0
		c.mu.Lock()
		var ld catalog.Delta
		next, ld = c.withListings(next)
		c.mu.Unlock()
		added, removed, changed = deltaKeys(delta.Then(ld))
	}
	read := time.Since(began)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old == nil {
		if len(c.listings) == 0 {
			if err := c.restoreListings(ctx); err != nil {
				return fmt.Errorf("read the listers' listings: %w", err)
			}
		}
		c.forgetListings(next)
		next = next.AddListings(c.listedRepos())
		listersAdded = len(next.Listers()) > 0
	}
	if listersAdded {
		defer c.wakeListers()
	}
	problems := next.Problems()
	first := old == nil && c.engine.Len() == 0 // a first start: every key is new
	if old == nil && !first {
		added, removed = c.diffFromEngine(next)
	}
	removed = c.holdOrCount(commit, c.effectiveRemovals(removed))
	c.unhold(added) // listed again: no longer a removal to hold
	c.cat = next
	c.setProblems(problems)
	nAdded := len(added)
	if first {
		nAdded = c.placeAll(next)
		c.feedAddAll()
	} else {
		c.applyChange(added, removed, changed)
	}
	c.dirtyMeta("catalog_commit", commit)
	c.applyHeld()
	c.log.Info("catalog applied", "commit", commit, "repos", next.Len(),
		"added", nAdded, "removed", len(removed), "changed", len(changed),
		"read_ms", read.Milliseconds(), "took_ms", time.Since(began).Milliseconds())
	c.signalPersist()
	return nil
}

// placeAll places every key of the first catalog of an engine without
// keys (a first start), and returns how many it placed. The keys go from
// the catalog to the engine without a list of a million strings in
// between. Caller holds c.mu.
func (c *Coordinator) placeAll(next *catalog.Catalog) int {
	keys := func(yield func(repokey.Key) bool) {
		next.Keys(func(k repokey.Key) bool {
			if _, ok := c.overlay[k]; ok {
				return true // removed through the API (an addition would be placed)
			}
			return yield(k)
		})
	}
	for k, name := range c.declaredNetworks() {
		if _, err := c.nets.Declare(k, name); err != nil {
			c.log.Warn("network: declared name ignored", "key", k, "err", err)
		}
	}
	c.engine.SetNetworks(networkMap(c.nets))
	c.engine.AddKeySeq(next.Len(), keys)
	c.tierFed = false // every unit given again, if the tier needs them
	for _, s := range c.fullSessions() {
		s.queueSweep(keys)
	}
	c.placeDirty = true
	c.decide()
	return c.engine.Len()
}

// diffFromEngine compares a freshly loaded catalog with the keys the
// engine places (a restart whose commit was lost). It works on keys only:
// at a million entries, building entries would cost hundreds of megabytes
// for nothing. Caller holds c.mu.
func (c *Coordinator) diffFromEngine(next *catalog.Catalog) (added, removed []repokey.Key) {
	next.Keys(func(k repokey.Key) bool {
		if !c.engine.Has(k) {
			added = append(added, k)
		}
		return true
	})
	c.engine.Each(func(k repokey.Key, _, _ uint32, _ bool) {
		if ov, ok := c.overlay[k]; ok && !ov.Removed {
			return // added through the API
		}
		if !next.Has(k.String()) {
			removed = append(removed, k)
		}
	})
	return added, removed
}

// effectiveRemovals keeps the keys whose removal from the catalog would
// remove a mirrored repository (not those added through the API, nor those
// already gone). Caller holds c.mu.
func (c *Coordinator) effectiveRemovals(keys []repokey.Key) []repokey.Key {
	out := keys[:0:0]
	for _, k := range keys {
		if ov, ok := c.overlay[k]; ok && !ov.Removed || !c.engine.Has(k) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// deltaKeys turns a catalog delta into keys.
func deltaKeys(d catalog.Delta) (added, removed, changed []repokey.Key) {
	for _, e := range d.Added {
		added = append(added, e.Key)
	}
	for _, e := range d.Removed {
		removed = append(removed, e.Key)
	}
	for _, e := range d.Changed {
		changed = append(changed, e.Key)
	}
	return added, removed, changed
}

// effectiveKeys is the key set of the catalog with the API's overlay.
// Caller holds c.mu (or is restoring).
func (c *Coordinator) effectiveKeys() []repokey.Key {
	var keys []repokey.Key
	if c.cat != nil {
		keys = make([]repokey.Key, 0, c.cat.Len()+len(c.overlay))
		c.cat.Keys(func(k repokey.Key) bool {
			if _, ok := c.overlay[k]; !ok {
				keys = append(keys, k)
			}
			return true
		})
	}
	for k, ov := range c.overlay {
		if !ov.Removed {
			keys = append(keys, k)
		}
	}
	for k := range c.held {
		if _, ok := c.overlay[k]; !ok && (c.cat == nil || !c.cat.Has(k.String())) {
			keys = append(keys, k) // a held removal: still placed
		}
	}
	return keys
}

// entry is the effective catalog entry of key: the API's overlay wins over
// the catalog. An entry of the overlay or of a held removal has no Key
// (only the catalog's parser makes one): the caller has the key. Caller
// holds c.mu.
func (c *Coordinator) entry(key repokey.Key) (catalog.Entry, bool) {
	if ov, ok := c.overlay[key]; ok {
		if ov.Removed {
			return catalog.Entry{}, false
		}
		return catalog.Entry{URL: ov.URL, Fallbacks: ov.Fallbacks, Attrs: ov.Attrs}, true
	}
	if c.cat != nil {
		if e, ok := c.cat.Get(key.String()); ok {
			return e, true
		}
	}
	return c.heldEntryOf(key)
}

// applyChange changes the repository set. The entries themselves are read
// with entry(), so c.cat and c.overlay must already say the new truth.
// The API's overlay wins over the catalog. added is filtered in place
// (its order and contents are not kept). Caller holds c.mu.
func (c *Coordinator) applyChange(added, removed, changed []repokey.Key) {
	add, rm := added[:0], []repokey.Key(nil) // no copy of a big change
	full := c.fullSessions()
	for _, k := range added {
		if ov, ok := c.overlay[k]; ok {
			if !ov.Removed {
				changed = append(changed, k) // already placed by the API
			}
			continue
		}
		if c.engine.Has(k) {
			changed = append(changed, k)
			continue
		}
		add = append(add, k)
	}
	for _, k := range removed {
		if ov, ok := c.overlay[k]; ok && !ov.Removed || !c.engine.Has(k) {
			continue // added through the API: stays until removed there
		}
		rm = append(rm, k)
		if _, ok := c.status[k]; ok {
			delete(c.status, k)
			c.dirty[k] = false
		}
		delete(c.replicaDiffs, k)
		delete(c.renames, k)
		delete(c.forgeIDs, k)
		for _, s := range full {
			s.queueRemoved(k)
		}
	}
	if len(add) > 0 {
		c.declareNetworks(add) // placed with their network from the start
		c.engine.AddKeys(add...)
		c.tierTouch(add...)
		c.placeDirty = true
	}
	if len(rm) > 0 {
		c.engine.RemoveKeys(rm...) // drops at owners and targets
		c.tierTouch(rm...)
		c.forgetNetworks(rm)
		c.placeDirty = true
	}
	c.declareNetworks(changed)
	c.feedKeysChanged(add, rm)
	for _, k := range changed {
		if !c.engine.Has(k) {
			continue
		}
		owner, target := c.owner(k)
		for _, id := range []uint32{owner, target} {
			if s := c.sessions[id]; s != nil && id != 0 {
				s.queueAssign(k, false) // carries the new URL
			}
		}
		c.broadcastState(k)
	}
	for _, s := range full {
		for _, k := range add {
			s.queueState(k)
		}
	}
	c.decide()
}

var errNoPurge = errors.New("no catalog change is waiting for confirmation")

// confirmPurge applies the removals held by purge protection.
func (c *Coordinator) confirmPurge(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) == 0 {
		return "", errNoPurge
	}
	n, commit := c.confirmHeld()
	c.log.Warn("held removals confirmed by the operator", "commit", commit, "removed", n)
	c.signalPersist()
	return fmt.Sprintf("applied the removals held since catalog commit %s: %d repositories removed", commit, n), nil
}

// tunnelAddrs lists where partial nodes open tunnels. Caller holds c.mu.
func (c *Coordinator) tunnelAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		if n.full() && n.TunnelAddr != "" {
			out = append(out, n.TunnelAddr)
		}
	}
	sort.Strings(out)
	return out
}

func (c *Coordinator) signalPersist() {
	select {
	case c.flush <- struct{}{}:
	default:
	}
}

func (c *Coordinator) dirtyMeta(key, value string) { c.meta[key] = value }

// persistLoop writes dirty state in batches.
func (c *Coordinator) persistLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.flush:
		case <-c.clk.After(time.Second):
		}
		_ = c.persist(ctx)
	}
}

// persist writes what changed since the last call in one atomic batch, so
// that the stored catalog commit, overlay, repository set and placement
// always agree with each other.
func (c *Coordinator) persist(ctx context.Context) error {
	c.mu.Lock()
	if len(c.dirty) == 0 && len(c.meta) == 0 && len(c.forget) == 0 && len(c.overlayDirty) == 0 && len(c.listingDirty) == 0 &&
		!c.memberDirty && !c.placeDirty && !c.tierDirty {
		c.mu.Unlock()
		return nil
	}
	ops := make([]store.Op, 0, len(c.dirty)+len(c.meta)+len(c.overlayDirty)+len(c.forget)+3)
	for k, v := range c.meta {
		ops = append(ops, store.Op{Bucket: bucketMeta, Key: k, Value: []byte(v)})
	}
	for k := range c.overlayDirty {
		b, _ := json.Marshal(c.overlay[k])
		ops = append(ops, store.Op{Bucket: bucketOverlay, Key: k.String(), Value: b})
	}
	ops = append(ops, c.listingOps()...)
	for _, id := range c.forget {
		ops = append(ops, store.Op{Bucket: bucketNodes, Key: fmt.Sprint(id), Delete: true})
	}
	for k, keep := range c.dirty {
		r := c.status[k]
		if !keep || r == nil {
			ops = append(ops, store.Op{Bucket: bucketRepos, Key: k.String(), Delete: true})
			continue
		}
		rec := r.record(k)
		rec.Roots, rec.Network, rec.Parent = c.nets.Roots(k), c.nets.Of(k), c.nets.Parent(k).String()
		rec.Size = c.engine.Size(k)
		b, _ := json.Marshal(rec)
		ops = append(ops, store.Op{Bucket: bucketRepos, Key: k.String(), Value: b})
	}
	ops = append(ops,
		store.Op{Bucket: bucketMeta, Key: "membership", Value: c.table.Snapshot()},
		store.Op{Bucket: bucketMeta, Key: "placement", Value: c.engine.Snapshot()})
	if c.tierDirty {
		ops = append(ops, store.Op{Bucket: bucketMeta, Key: metaTier, Value: c.tier.Snapshot()})
	}
	dirty, meta, overlayDirty, forget, listingDirty := c.dirty, c.meta, c.overlayDirty, c.forget, c.listingDirty
	c.dirty, c.meta, c.overlayDirty, c.forget, c.listingDirty = map[repokey.Key]bool{}, map[string]string{}, map[repokey.Key]bool{}, nil, map[string]bool{}
	c.memberDirty, c.placeDirty, c.tierDirty = false, false, false
	c.mu.Unlock()
	err := c.db.Batch(ctx, ops)
	if err == nil {
		return nil
	}
	c.log.Error("persist state failed; will retry", "err", err)
	// Put the changes back so that nothing is lost (newer ones win).
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range dirty {
		if _, newer := c.dirty[k]; !newer {
			c.dirty[k] = v
		}
	}
	for k, v := range meta {
		if _, newer := c.meta[k]; !newer {
			c.meta[k] = v
		}
	}
	for k := range overlayDirty {
		c.overlayDirty[k] = true
	}
	for k := range listingDirty {
		c.listingDirty[k] = true
	}
	c.forget = append(c.forget, forget...)
	c.memberDirty, c.placeDirty, c.tierDirty = true, true, true
	return fmt.Errorf("store the coordinator's state: %w", err)
}

func (c *Coordinator) saveNode(ctx context.Context, n *nodeRecord) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return c.db.Put(ctx, bucketNodes, fmt.Sprint(n.ID), b)
}
