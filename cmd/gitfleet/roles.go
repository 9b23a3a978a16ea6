package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/bandwidth"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/coordinator"
	"github.com/gitfleet/gitfleet/internal/demo"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/fullnode"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/ha"
	"github.com/gitfleet/gitfleet/internal/hours"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/prefault"
	"github.com/gitfleet/gitfleet/internal/secretfile"
	"github.com/gitfleet/gitfleet/internal/tlsconf"
)

func coordinatorConfig(cfg config.Config, dataDir string) coordinator.Config {
	return coordinator.Config{
		DataDir: dataDir, Catalog: cfg.Catalog, CatalogInterval: cfg.CatalogInterval, ListerInterval: cfg.ListerInterval, JoinToken: cfg.JoinToken,
		FullToken: cfg.FullToken,
		Grace:     cfg.Grace, Warmup: cfg.Warmup, WarmupNodes: cfg.WarmupNodes, HeartbeatInterval: cfg.Heartbeat,
		AllowPrivate: cfg.AllowPrivateUpstreams, MaxPurgeShare: cfg.MaxPurge, PurgeWindow: cfg.PurgeWindow,
		LoadFactor: cfg.LoadFactor, FullReplicas: cfg.FullReplicas, BatchSize: cfg.AssignBatch, MaxClonesInFlight: cfg.MaxClonesInFlight,
		BulkLoad: bulkLoadGC, PrepareHeap: prepareHeapOnce(),
	}
}

// withTLS adds the TLS settings to a coordinator's and a node's
// configurations (either may be nil).
func withTLS(cfg config.Config, ccfg *coordinator.Config, ncfg *fullnode.Config) error {
	server, err := tlsconf.Server(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return err
	}
	client, err := tlsconf.Client(cfg.TLS, cfg.TLSCA)
	if err != nil {
		return err
	}
	if ccfg != nil {
		ccfg.TLS = server
	}
	if ncfg != nil {
		ncfg.TLS, ncfg.TunnelTLS = client, server
	}
	return nil
}

// bulkLoadCeiling is the soft memory limit while a whole catalog is loaded,
// unless --memory-limit (or GOMEMLIMIT) sets one: a million .list entries
// need about 200 MiB, and a catalog whose parsing leaves much garbage
// (YAML entries with attributes) is collected from there on.
const bulkLoadCeiling = 256 << 20

// bulkLoadGC turns the garbage collector's proportional pacing off while a
// whole catalog is loaded and placed, so that it runs only near the soft
// memory limit, and returns the function that restores both settings.
// Nearly all that a load of .list files allocates stays (its garbage is a
// tenth of it): at the usual GOGC=100 the collector would mark the growing
// catalog each time the heap doubles, a quarter of the load's time, and
// its last cycle could leave the peak at twice what stays. The first
// cycle after the load runs in the background.
func bulkLoadGC() (done func()) {
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 {
		debug.SetMemoryLimit(bulkLoadCeiling)
	}
	return func() {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(percent)
	}
}

// heapPerCatalogByte is about the heap a cold coordinator takes per byte
// of catalog, in tenths: its peak is 208 MiB, about 190 MiB of it heap, for the
// 43 MB of a generated catalog of a million entries in .list files.
const heapPerCatalogByte = 45

// prepareHeapOnce returns the coordinator's PrepareHeap: it has the kernel
// back, in one call, the heap that loading a catalog of catalogBytes bytes
// will take, up to seven eighths of the soft memory limit (it is called
// within bulkLoadGC, whose limit then applies), and returns how many bytes
// it backed. A cold process faulting that memory in page by page spends
// more time on it, on a virtual machine, than on reading the catalog. Only
// the first call does anything: later loads in the same process (a
// restore that had to fetch first, a new term as leader) find a heap that
// is no longer fresh, and backing it again would only zero it.
func prepareHeapOnce() func(catalogBytes int64) int64 {
	var done atomic.Bool
	return func(catalogBytes int64) int64 {
		if done.Swap(true) {
			return 0
		}
		n := int(min(catalogBytes*heapPerCatalogByte/10, debug.SetMemoryLimit(-1)/8*7, math.MaxInt))
		if !prefault.Heap(n) {
			return 0
		}
		return int64(n)
	}
}

// nodeConfig turns the settings into a full node's configuration, parsing
// the ones that need it; a partial node takes its runtime's part (Config).
func nodeConfig(cfg config.Config, dataDir string) (fullnode.Config, error) {
	limits, err := parseHostLimits(cfg.HostLimit)
	if err != nil {
		return fullnode.Config{}, err
	}
	var quota int64
	if cfg.DiskQuota != "" {
		if quota, err = config.ParseBytes(cfg.DiskQuota); err != nil {
			return fullnode.Config{}, fmt.Errorf("--disk-quota: %w", err)
		}
	}
	if err := fullnode.ValidFullDiskPolicy(cfg.FullDiskPolicy); err != nil {
		return fullnode.Config{}, fmt.Errorf("--full-disk-policy: %w", err)
	}
	lim, err := nodeLimits(cfg)
	if err != nil {
		return fullnode.Config{}, err
	}
	maxBandwidth, err := bandwidth.Parse(cfg.MaxBandwidth)
	if err != nil {
		return fullnode.Config{}, fmt.Errorf("--max-bandwidth: %w", err)
	}
	activeHours, err := hours.Parse(cfg.ActiveHours, time.Local)
	if err != nil {
		return fullnode.Config{}, fmt.Errorf("--active-hours: %w", err)
	}
	serve, err := serveLimits(cfg)
	if err != nil {
		return fullnode.Config{}, err
	}
	packCache, err := servePackCache(cfg)
	if err != nil {
		return fullnode.Config{}, err
	}
	apiCfg, err := apiConfig(cfg)
	if err != nil {
		return fullnode.Config{}, err
	}
	return fullnode.Config{
		Config: node.Config{
			DataDir: dataDir, Name: cfg.Name, Coordinators: cfg.Coordinator, JoinToken: cfg.JoinToken,
			Capacity: cfg.Capacity, Fetchers: cfg.Fetchers, Budget: cfg.Budget, MaxInterval: cfg.MaxInterval, FedMaxInterval: cfg.FedMaxInterval, ArchivedInterval: cfg.ArchivedInterval,
			MinInterval: cfg.MinInterval, Policy: cfg.Policy, GitTimeout: cfg.GitTimeout,
			IntegrityInterval: cfg.VerifyInterval, Retention: cfg.Retention, PruneAfter: cfg.PruneAfter,
			Archive:                mirror.ArchivePolicy{All: cfg.ArchiveRewrites, Retention: cfg.ArchiveRetention, MaxRefs: cfg.ArchiveMaxRefs},
			MaintenanceConcurrency: cfg.MaintConcurrency, MaintenanceDuty: cfg.MaintDuty, MaintenanceFullInterval: cfg.MaintFullInterval,
			AllowPrivate: cfg.AllowPrivateUpstreams, HostLimits: limits, HostConcurrency: cfg.HostConcurrency, DiskQuota: quota,
			LogPerRepo: cfg.LogPerRepo, LogMaxAge: cfg.LogMaxAge, Limits: lim,
			MaxBandwidth: maxBandwidth, ActiveHours: activeHours, DeclineUrgent: cfg.DeclineUrgent,
		},
		FullToken: cfg.FullToken, HTTPAddr: cfg.HTTP, TunnelAddr: cfg.Tunnel, TunnelAdvertise: cfg.TunnelAdvertise, PublicURL: cfg.PublicURL,
		FullDiskPolicy: cfg.FullDiskPolicy, MismatchRevoke: cfg.MismatchRevoke,
		StaleRevoke: cfg.StaleRevoke, SpotCheckPerHour: cfg.SpotCheckPerHour, HintWait: cfg.HintWait, MoveConcurrency: cfg.FullMoveConcurrency,
		API: apiCfg, Serve: serve, ServeCache: packCache, Alerts: alertConfig(cfg),
		IdleConnTimeout: cfg.ServeIdleConnTimeout, MaxConnsPerClient: cfg.ServeConnsPerClient,
	}, nil
}

func serveLimits(cfg config.Config) (gitserve.Limits, error) {
	max, err := config.ParseBytes(cfg.ServeMaxRequest)
	if err != nil {
		return gitserve.Limits{}, fmt.Errorf("--serve-max-request: %w", err)
	}
	return gitserve.Limits{MaxRequest: max, ReadTimeout: cfg.ServeReadTimeout, IdleTimeout: cfg.ServeIdleTimeout, TipGrace: cfg.ServeTipGrace,
		MaxUploadPacks: cfg.ServeMaxUploadPacks, MaxPerRepo: cfg.ServeMaxPerRepo, QueueWait: cfg.ServeQueueWait,
		QueueLength: cfg.ServeQueueLength, MaxPerClient: cfg.ServeMaxPerClient}, nil
}

func servePackCache(cfg config.Config) (gitserve.CacheConfig, error) {
	size, err := config.ParseBytes(cfg.ServePackCacheSize)
	if err != nil {
		return gitserve.CacheConfig{}, fmt.Errorf("--serve-pack-cache-size: %w", err)
	}
	return gitserve.CacheConfig{MaxBytes: size, TTL: cfg.ServePackCacheTTL, Window: cfg.ServePackCacheWindow}, nil
}

func apiConfig(cfg config.Config) (api.Config, error) {
	// The forges a webhook may auto-add from: the well-known hosts and
	// --forge (a flag of gitfleet up; a full node alone takes the former).
	forges, err := forge.Parse(rejoinOptions(cfg.Forge), nil, "")
	if err != nil {
		return api.Config{}, err
	}
	secrets := map[string]string{}
	if cfg.WebhookSecret != "" {
		secrets[""] = cfg.WebhookSecret
	}
	for kind, s := range cfg.WebhookSecrets {
		if s != "" {
			secrets[string(kind)] = s
		}
	}
	var webhookForges []forge.Forge
	for _, h := range forges.Hosts() {
		webhookForges = append(webhookForges, forges.Forges[h])
	}
	return api.Config{Token: cfg.APIToken, WebhookSecrets: secrets, AutoAdd: cfg.WebhookAutoAdd, Forges: webhookForges,
		OutgoingHooks: cfg.EventsWebhook, OutgoingSecret: cfg.EventsWebhookSecret, CheckSpacing: cfg.WebhookCheckSpacing,
		HostRate: cfg.WebhookHostRate, HostBurst: cfg.WebhookHostBurst, ReadTimeout: cfg.ServeReadTimeout}, nil
}

// parseHostLimits reads "host=N/h" settings into checks per hour by host.
func parseHostLimits(limits []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range limits {
		host, rate, ok := strings.Cut(part, "=")
		n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rate), "/h"), 64)
		if !ok || host == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("--host-limit: %q: want host=N/h, e.g. github.com=5000/h", part)
		}
		out[strings.ToLower(strings.TrimSpace(host))] = n
	}
	return out, nil
}

func runCoordinator(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", cfg.GRPC)
	if err != nil {
		return fmt.Errorf("listen --grpc %s: %w", cfg.GRPC, err)
	}
	ccfg := coordinatorConfig(cfg, cfg.Data)
	if err := withTLS(cfg, &ccfg, nil); err != nil {
		ln.Close()
		return err
	}
	if err := withEgress(cfg, &ccfg, nil); err != nil {
		ln.Close()
		return err
	}
	return withMetrics(ctx, cfg, log, func(ctx context.Context, reg metrics.Registry) error {
		ccfg.Metrics = reg
		return serveCoordinator(ctx, cfg, ccfg, log, ln)
	})
}

// serveCoordinator serves a coordinator on ln: alone, or with --etcd as
// one of the coordinators that share a fleet.
func serveCoordinator(ctx context.Context, cfg config.Config, ccfg coordinator.Config, log *slog.Logger, ln net.Listener) error {
	if len(cfg.Etcd) == 0 {
		return coordinator.Serve(ctx, ccfg, log, ln)
	}
	defer ln.Close()
	advertise, err := advertiseAddr(cfg.Advertise, ln.Addr())
	if err != nil {
		return err
	}
	// https endpoints are verified against the system's roots or --tls-ca.
	https := slices.ContainsFunc(cfg.Etcd, func(ep string) bool { return strings.HasPrefix(ep, "https://") })
	etcdTLS, err := tlsconf.Client(https, cfg.TLSCA)
	if err != nil {
		return err
	}
	client, err := ha.Dial(ctx, cfg.Etcd, etcdTLS)
	if err != nil {
		return err
	}
	defer client.Close()
	log.Info("sharing the fleet through etcd", "etcd", cfg.Etcd.String(), "prefix", cfg.EtcdPrefix, "advertise", advertise)
	el := elector{Elector: ha.NewElector(client, cfg.EtcdPrefix, cfg.EtcdLease, advertise), compaction: cfg.EtcdCompaction, log: log}
	return coordinator.ServeElected(ctx, ccfg, log, clock.Real{}, ln, el)
}

// advertiseAddr is the address followers give nodes for this coordinator:
// --advertise, or the bound address if it names a host.
func advertiseAddr(flag string, bound net.Addr) (string, error) {
	if flag != "" {
		return flag, nil
	}
	host, _, err := net.SplitHostPort(bound.String())
	if ip := net.ParseIP(host); err != nil || ip == nil || ip.IsUnspecified() {
		return "", fmt.Errorf("with --etcd, give --advertise HOST:PORT: --grpc %s names no host that nodes could reach", bound)
	}
	return bound.String(), nil
}

// elector adapts ha's election to what the coordinator consumes; each
// term compacts etcd's history while it lasts.
type elector struct {
	*ha.Elector
	compaction time.Duration
	log        *slog.Logger
}

func (e elector) Campaign(ctx context.Context) (coordinator.Term, error) {
	t, err := e.Elector.Campaign(ctx)
	if err != nil {
		return nil, err
	}
	cctx, stop := context.WithCancel(ctx)
	ct := &compactingTerm{Term: t, stop: stop, compacted: make(chan struct{})}
	go func() {
		defer close(ct.compacted)
		t.CompactHistory(cctx, clock.Real{}, e.compaction, e.log)
	}()
	return ct, nil
}

// compactingTerm is a term whose history compaction is owned by the
// term: the coordinator resigns every term it is given, and Resign stops
// the compaction and waits for it before the leadership goes.
type compactingTerm struct {
	*ha.Term
	stop      context.CancelFunc
	compacted chan struct{} // closed when CompactHistory has returned
}

func (t *compactingTerm) Resign(ctx context.Context) error {
	t.stop()
	<-t.compacted
	return t.Term.Resign(ctx)
}

func runNode(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if cfg.Mode != "partial" && cfg.Mode != "full" {
		return fmt.Errorf("node: mode %q: want partial or full", cfg.Mode)
	}
	ncfg, err := nodeConfig(cfg, cfg.Data)
	if err != nil {
		return err
	}
	if err := withTLS(cfg, nil, &ncfg); err != nil {
		return err
	}
	if err := withEgress(cfg, nil, &ncfg.Config); err != nil {
		return err
	}
	return withMetrics(ctx, cfg, log, func(ctx context.Context, reg metrics.Registry) error {
		ncfg.Metrics = reg
		if cfg.Mode == "full" {
			f, err := fullnode.New(ncfg, log, clock.Real{})
			if err != nil {
				return err
			}
			return f.Run(ctx)
		}
		n, err := node.New(ncfg.Config, log, clock.Real{}, nil)
		if err != nil {
			return err
		}
		return n.Run(ctx)
	})
}

// runUp runs a coordinator and a full node in one process: the
// single-machine mirror, which partial nodes can join later. Every setting
// is checked and every port bound before either role starts, so that a
// mistake stops it before it starts anything or prints anything (a new
// API token).
func runUp(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if cfg.WarmupNodes == 0 {
		cfg.WarmupNodes = 1 // the full node itself is enough to start
	}
	if len(cfg.Etcd) > 0 && (cfg.FullToken == "" || cfg.JoinToken == "") {
		return errors.New("up with --etcd: give every machine the same --full-token and --join-token (env GITFLEET_FULL_TOKEN, GITFLEET_JOIN_TOKEN): " +
			"its full node may register with another machine's coordinator, and partial nodes with any of them")
	}
	if cfg.FullToken == "" {
		// Both roles are in this process: a token of its own admits its
		// full node (give --full-token to admit other full nodes).
		cfg.FullToken = rand.Text()
	}
	ccfg := coordinatorConfig(cfg, filepath.Join(cfg.Data, "coordinator"))
	ncfg, err := nodeConfig(cfg, filepath.Join(cfg.Data, "node"))
	if err != nil {
		return err
	}
	if err := withTLS(cfg, &ccfg, &ncfg); err != nil {
		return err
	}
	if err := withEgress(cfg, &ccfg, &ncfg.Config); err != nil {
		return err
	}
	// The full node dials its own coordinator, whose certificate names the
	// public host: it accepts exactly that certificate (or plain TCP). With
	// --etcd the leader may be another machine: the usual checks apply.
	if len(cfg.Etcd) == 0 {
		ncfg.TLS = tlsconf.Pinned(ccfg.TLS)
	}
	check := ccfg
	if check.JoinToken == "" {
		check.JoinToken = "up's own" // made below, once every port is bound
	}
	if err := check.Check(); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	ports, err := bindUp(cfg)
	if err != nil {
		return err
	}
	defer ports.close() // those that no role took
	var joinMade string // the file of a join token up made, said once it starts
	if ccfg.JoinToken == "" {
		if ccfg.JoinToken, joinMade, err = upJoinToken(cfg.Data); err != nil {
			return err
		}
	}
	ncfg.Coordinators = []string{ports.grpc.Addr().String()}
	ncfg.HTTPListener, ncfg.TunnelListener = ports.take(&ports.http), ports.take(&ports.tunnel)
	// One registry for both roles, served on the full node's --http.
	ncfg.Metrics = metrics.NewRegistry()
	ccfg.Metrics = ncfg.Metrics
	n, err := fullnode.New(ncfg, log.With("role", "full"), clock.Real{})
	if err != nil {
		ncfg.HTTPListener.Close()
		ncfg.TunnelListener.Close()
		return err
	}
	if joinMade != "" {
		log.Info("partial nodes join with the join token in the file (give --join-token to choose it)", "file", joinMade)
	}
	grpcLn := ports.take(&ports.grpc)
	return servePprof(ctx, ports.take(&ports.pprof), log, func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 2)
		go func() { errc <- serveCoordinator(ctx, cfg, ccfg, log.With("role", "coordinator"), grpcLn) }()
		go func() { errc <- n.Run(ctx) }()
		err := <-errc
		cancel()
		if err2 := <-errc; err == nil {
			err = err2
		}
		return err
	})
}

// upPorts are the ports gitfleet up binds before it starts a role.
type upPorts struct {
	grpc, http, tunnel, pprof net.Listener // pprof: nil without --pprof
}

// bindUp binds every port of up: a port in use stops it before it starts
// anything.
func bindUp(cfg config.Config) (*upPorts, error) {
	p := &upPorts{}
	var err error
	for _, l := range []struct {
		flag, addr string
		ln         *net.Listener
	}{{"grpc", cfg.GRPC, &p.grpc}, {"http", cfg.HTTP, &p.http}, {"tunnel", cfg.Tunnel, &p.tunnel}, {"pprof", cfg.Pprof, &p.pprof}} {
		if l.flag == "pprof" && l.addr == "" {
			continue
		}
		if *l.ln, err = net.Listen("tcp", l.addr); err != nil {
			p.close()
			return nil, fmt.Errorf("listen --%s %s: %w", l.flag, l.addr, err)
		}
	}
	return p, nil
}

// take hands the listener at *ln over to its role: close no longer closes
// it.
func (p *upPorts) take(ln *net.Listener) net.Listener {
	l := *ln
	*ln = nil
	return l
}

func (p *upPorts) close() {
	for _, ln := range []net.Listener{p.grpc, p.http, p.tunnel, p.pprof} {
		if ln != nil {
			ln.Close()
		}
	}
}

// upJoinToken is the join token of up without --join-token: made at its
// first start and kept in <data>/join-token (file), so that partial nodes
// can join later, with the same token after a restart.
func upJoinToken(dataDir string) (token, file string, err error) {
	file = filepath.Join(dataDir, "join-token")
	if token, _, err = secretfile.ReadOrCreate(file); err != nil {
		return "", "", fmt.Errorf("up: the join token: %w", err)
	}
	return token, file, nil
}

func runDemo(ctx context.Context, cfg config.Config, out io.Writer) error {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	return demo.Run(ctx, demo.Options{HTTPAddr: cfg.HTTP, LogLevel: level}, out)
}
