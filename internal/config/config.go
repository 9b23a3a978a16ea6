// Package config is gitfleet's configuration: one struct with defaults that
// work, loaded from a YAML file (--config) and then from flags, every key
// being both. The table in docs/configuration.md is checked against it by a
// test, so the two cannot drift apart.
package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config holds every setting of every role. The `name` tag is both the YAML
// key and the flag name; `help` is the flag's usage and the text of docs/configuration.md.
type Config struct {
	Data                  string        `name:"data" help:"data directory (state, mirrors)"`
	Catalog               string        `name:"catalog" help:"catalog repository: a git URL or a local path (coordinator, up)"`
	CatalogInterval       time.Duration `name:"catalog-interval" help:"how often the catalog is re-fetched"`
	HTTP                  string        `name:"http" help:"public HTTP address of a full node or of up: git, API, console"`
	Metrics               string        `name:"metrics" help:"coordinator, partial node: address to serve Prometheus metrics at /metrics, e.g. 127.0.0.1:9090 (empty: none; a full node and up serve them on --http)"`
	Pprof                 string        `name:"pprof" help:"every role: address to serve Go's runtime profiles at /debug/pprof/, e.g. 127.0.0.1:6060 (empty: none; keep it private, it shows the process's internals)"`
	GRPC                  string        `name:"grpc" help:"coordinator: listen address for nodes (gRPC)"`
	Coordinator           List          `name:"coordinator" help:"node: the coordinator's gRPC address (host:port); several for coordinators that share a fleet through etcd"`
	JoinToken             string        `name:"join-token" help:"shared secret that admits new partial nodes (env GITFLEET_JOIN_TOKEN); the coordinator takes a comma-separated list, to rotate it"`
	FullToken             string        `name:"full-token" help:"coordinator, full node: the second secret that admits full nodes, never given to volunteers (env GITFLEET_FULL_TOKEN); up makes its own unless it shares a fleet through --etcd"`
	Mode                  string        `name:"mode" help:"node: partial (a worker) or full (the aggregator)"`
	Name                  string        `name:"name" help:"node: a name for people (default: the host name)"`
	Capacity              float64       `name:"capacity" help:"node: placement weight, 1 = a standard node; 0 = a full node that fetches nothing itself"`
	Tunnel                string        `name:"tunnel" help:"full node: listen address for partial nodes' tunnels"`
	TunnelAdvertise       string        `name:"tunnel-advertise" help:"full node: tunnel address given to partial nodes (default: the bound --tunnel address)"`
	PublicURL             string        `name:"public-url" help:"full node: base URL of the mirror shown in clone URLs (default: from the request)"`
	ServeMaxRequest       string        `name:"serve-max-request" help:"full node: largest git fetch request, after decompression (over it: 413)"`
	ServeIdleTimeout      time.Duration `name:"serve-idle-timeout" help:"full node: longest time a git upload-pack serving one client may go without progress (a client that stops reading)"`
	ServeTipGrace         time.Duration `name:"serve-tip-grace" help:"full node: how long a tip a protocol v2 ref listing advertised may still be fetched after a force-push moved the ref away, while its object is on disk (a clone racing the push; negative: none)"`
	ServeReadTimeout      time.Duration `name:"serve-read-timeout" help:"full node: longest time a client may take to send a request body: a git fetch request, an API call, a webhook delivery (over it: 408)"`
	ServeMaxUploadPacks   int           `name:"serve-max-upload-packs" help:"full node: git upload-pack runs at once (over it: a wait in the queue, then 503 with Retry-After; 0: no cap)"`
	ServeMaxPerRepo       int           `name:"serve-max-per-repo" help:"full node: git upload-pack runs at once for one repository (over it: as --serve-max-upload-packs; 0: no cap)"`
	ServeQueueWait        time.Duration `name:"serve-queue-wait" help:"full node: longest wait of a git request, for its turn behind its client's other requests and then for a run slot together (past it: 429, or 503 for a run slot, with Retry-After; 0: no wait)"`
	ServeQueueLength      int           `name:"serve-queue-length" help:"full node: git requests that may wait their client's turn, and runs that may wait for a slot (beyond: 429 or 503 at once, but a client with fewer waiting takes the place of the newest request of the client with the most)"`
	ServeMaxPerClient     int           `name:"serve-max-per-client" help:"full node: a client address's share: git requests served to it at once, from a run or the pack cache; more wait their turn, oldest first, for up to --serve-queue-wait (then 429 with Retry-After), their bodies holding at most this many times --serve-max-request (0: no cap)"`
	ServePackCacheSize    string        `name:"serve-pack-cache-size" help:"full node: disk bound of the pack cache in <data>/tmp/packcache, where identical git fetches share one run and its answer is kept (0: no cache)"`
	ServePackCacheTTL     time.Duration `name:"serve-pack-cache-ttl" help:"full node: how long the pack cache keeps an answer that no request uses"`
	TLSCert               string        `name:"tls-cert" help:"coordinator, full node: certificate (PEM) of the gRPC and tunnel listeners; with --tls-key they speak TLS"`
	TLSKey                string        `name:"tls-key" help:"the private key (PEM) of --tls-cert"`
	TLS                   bool          `name:"tls" help:"node: dial the coordinator and full nodes' tunnels over TLS, verified against the system's roots or --tls-ca"`
	TLSCA                 string        `name:"tls-ca" help:"node: PEM file of the certificates that sign the coordinator's and full nodes' certificates (implies --tls)"`
	Etcd                  List          `name:"etcd" help:"coordinator, up: etcd endpoints (e.g. http://10.0.0.1:2379) where two or three coordinators share the fleet's state; one leads, the others take over"`
	EtcdPrefix            string        `name:"etcd-prefix" help:"coordinator: the keys of this fleet in etcd start with this prefix"`
	EtcdLease             time.Duration `name:"etcd-lease" help:"coordinator: how long a leader that stops answering keeps its leadership"`
	EtcdCompaction        time.Duration `name:"etcd-compaction" help:"coordinator: the leader compacts etcd's history this often, to the revision of one interval before (0: leave it to etcd's auto-compaction)"`
	Advertise             string        `name:"advertise" help:"coordinator with --etcd: this coordinator's gRPC address as nodes reach it (default: the --grpc address, if it names a host)"`
	Grace                 time.Duration `name:"grace" help:"coordinator: how long a silent node keeps its repositories"`
	Warmup                time.Duration `name:"warmup" help:"coordinator: how long a coordinator with no stored state waits for nodes before placing"`
	WarmupNodes           int           `name:"warmup-nodes" help:"coordinator: end the warm-up early once this many nodes are alive (0: time only)"`
	Heartbeat             time.Duration `name:"heartbeat" help:"coordinator: how often nodes send heartbeats (a node is suspect after 3 missed)"`
	LoadFactor            float64       `name:"load-factor" help:"coordinator: no node holds more than this many times its fair share of repositories"`
	AssignBatch           int           `name:"assign-batch" help:"coordinator: repositories per assignment message on a node's session"`
	MaxClonesInFlight     int           `name:"max-clones-in-flight" help:"coordinator: clones a node is asked to make at once; more follow as it confirms them or they fail (a failed clone frees its slot; the node retries it on its own backoff)"`
	MaxPurge              float64       `name:"max-purge" help:"coordinator: largest share of repositories that catalog changes may remove within --purge-window without confirmation (more is held; the rest of the change is applied)"`
	PurgeWindow           time.Duration `name:"purge-window" help:"coordinator: the sliding window over which removals are counted against --max-purge"`
	MaxInterval           time.Duration `name:"max-interval" help:"node: the longest a repository may go unchecked"`
	FedMaxInterval        time.Duration `name:"fed-max-interval" help:"node: the longest a repository may go unchecked by its node when the coordinator says its host's forge feed works (the feed asks about it at least every --max-interval; 0: the longer of 7 days and --max-interval)"`
	MinInterval           time.Duration `name:"min-interval" help:"node: the shortest time between two background checks of one repository (if unset and --max-interval is under 4m: a quarter of it)"`
	Budget                float64       `name:"budget" help:"node: background upstream checks per hour (0: unlimited)"`
	MaxBandwidth          string        `name:"max-bandwidth" help:"node: the most bytes a second the node moves, its downloads from upstreams and its uploads to full nodes together, e.g. 20Mbit or 2MiB/s (empty: no cap; upstreams over git:// and ssh:// are not paced); the coordinator asks a capped node for fewer clones at once"`
	ActiveHours           string        `name:"active-hours" help:"node: the hours, HH:MM-HH:MM in the machine's time zone (e.g. 01:00-07:00, or 22:00-06:00 across midnight), outside which the node starts no background checks, maintenance or verification, and the coordinator gives it new repositories only when no other node can take them; urgent checks (first clones, on-demand, webhooks) still run (empty: always)"`
	DeclineUrgent         bool          `name:"decline-urgent-outside-hours" help:"node: outside --active-hours, urgent checks (first clones, on-demand and webhook checks) wait for the hours too"`
	StatusAddr            string        `name:"status-addr" help:"node: loopback address of the node's status, which gitfleet node status reads (empty: a free port of 127.0.0.1, written to <data>/status.addr)"`
	DiskQuota             string        `name:"disk-quota" help:"node: space the mirrors may use (on a full node, with the data kept for --retention and the pack cache), e.g. 500GiB (default: the whole file system); above 85% the node takes no new repositories"`
	FullDiskPolicy        string        `name:"full-disk-policy" help:"full node: what yields above the disk high water: refuse-new (no first pulls or clones of new repositories; updates go on) or refuse-all (no pulls or fetches)"`
	HostLimit             List          `name:"host-limit" help:"node: a per-host check limit, e.g. github.com=5000/h (repeat the flag, or a YAML list, for several hosts)"`
	Policy                string        `name:"policy" help:"node: freshness policy: adaptive, fixed, compass or sourcegraph"`
	Fetchers              int           `name:"fetchers" help:"node: checks and fetches running at once"`
	HostConcurrency       int           `name:"host-concurrency" help:"node: checks and fetches running at once against one upstream host (0: no cap but --fetchers)"`
	GitTimeout            time.Duration `name:"git-timeout" help:"longest a single git process may run"`
	MaxRepoSize           string        `name:"max-repo-size" help:"node: the most one mirror may hold on disk, e.g. 10GiB (0: no limit); a fetch that would pass it is stopped while the pack streams in"`
	MaxRefs               int           `name:"max-refs" help:"node: the most branches and tags a repository may have (0: no limit); above it the repository is not fetched"`
	MaxRefLength          int           `name:"max-ref-length" help:"node: the longest ref name mirrored, in bytes (0: no limit); longer refs are skipped and the rest mirrored"`
	GitMemoryLimit        string        `name:"git-memory-limit" help:"node: memory (data segment) each git process may allocate, e.g. 2GiB (0: no limit; Linux only)"`
	MaxTreeDepth          int           `name:"max-tree-depth" help:"node: deepest tree git may walk (core.maxTreeDepth; needs git 2.43, logged at start when missing; 0: git's default)"`
	AllowPrivateUpstreams bool          `name:"allow-private-upstreams" help:"shorthand: upstreams and webhooks may reach loopback and private networks and localhost names, on any port (tests, demo)"`
	EgressAllow           List          `name:"egress-allow" help:"CIDR prefixes, addresses, host names or *.suffixes that upstreams and webhooks may reach although the egress policy refuses them, on any port, e.g. 10.1.0.0/16 or git.corp.example (repeatable)"`
	Forge                 List          `name:"forge" help:"coordinator, up: a forge whose change feed tells of pushes, HOST=KIND[,api=URL] with KIND github, gitlab, gitea or gitee (repeatable; github.com, gitlab.com, gitee.com and codeberg.org are configured already; see docs/forges.md)"`
	ForgeToken            List          `name:"forge-token" help:"coordinator, up: a token of a forge's API, HOST=TOKEN (repeatable, used in turn; also env GITFLEET_FORGE_TOKENS); never sent to nodes, logged or shown"`
	ForgeBackoff          time.Duration `name:"forge-backoff" help:"coordinator, up: how long a forge's change feed waits after a failed request, doubling with each failure in a row up to 30m"`
	ForgeRequestsPerHour  float64       `name:"forge-requests-per-hour" help:"coordinator, up: requests a forge's change feed makes an hour, per token"`
	CaseInsensitiveHost   List          `name:"case-insensitive-host" help:"coordinator, full node, up: a host whose repository paths are case-insensitive, so that keys of its repositories are lower-cased, as github.com's and gitee.com's always are (repeatable; give it to the coordinator and every full node alike)"`
	EgressSchemes         List          `name:"egress-schemes" help:"URL schemes upstreams may use: https, http, git, ssh (git and ssh: see Safety)"`
	EgressPorts           List          `name:"egress-ports" help:"ports upstreams and webhooks may use besides their schemes' own (443, 80; git 9418, ssh 22)"`
	DNSServer             string        `name:"dns-server" help:"host:port of the DNS server that names of upstreams and webhooks are resolved with (default: the system's resolver)"`
	VerifyInterval        time.Duration `name:"verify-interval" help:"node: each mirror is verified in the background about this often, one at a time, at most 10% of the time (0: never)"`
	PruneAfter            time.Duration `name:"prune-after" help:"node: a mirror whose upstream deleted a ref or rewrote one (not a fast-forward) is repacked without the objects no ref reaches within this time, so they can no longer be fetched (0: at once)"`
	MaintConcurrency      int           `name:"maintenance-concurrency" help:"node: mirrors maintained at once in the background (repacked geometrically with a bitmap, commit graph written), chosen by need after fetches (0: no maintenance)"`
	MaintDuty             float64       `name:"maintenance-duty" help:"node: the most of the time each maintenance lane may be busy (0.1: at most 10%)"`
	MaintFullInterval     time.Duration `name:"maintenance-full-interval" help:"node: a mirror written to since its last full repack is repacked in full once this long has passed, which drops the objects no ref reaches (what --prune-after does not already drop)"`
	Retention             time.Duration `name:"retention" help:"node: how long a removed repository's data (full node) and the old tips of an emptied upstream are kept, so that re-adding it needs no clone and a deletion can be undone"`
	MismatchRevoke        int           `name:"mismatch-revoke" help:"full node: revoke a partial node after it served this many tips the upstream never had (0: never)"`
	StaleRevoke           int           `name:"stale-revoke" help:"full node: revoke a partial node after this many stale reports: repositories it reported unchanged after a push that the full node then found upstream (0: never)"`
	SpotCheckPerHour      int           `name:"spot-check-per-hour" help:"full node: repositories checked against their upstreams by the full node itself each hour, the oldest verified_at first, on hosts without a forge feed (0: none)"`
	HintWait              time.Duration `name:"hint-wait" help:"full node: how long an owner has to bring a change that a webhook or forge feed told of before the full node asks the upstream itself"`
	LogPerRepo            int           `name:"log-per-repo" help:"node: entries of the fetch log kept per repository (the newest)"`
	LogMaxAge             time.Duration `name:"log-max-age" help:"node: entries of the fetch log older than this are dropped"`
	APIToken              string        `name:"api-token" help:"full node: bearer token for API writes (default: generated at first start, kept in <data>/api-token)"`
	WebhookSecret         string        `name:"webhook-secret" help:"full node: secret of incoming webhooks, for every host"`
	WebhookSecretGitHub   string        `name:"webhook-secret-github" help:"full node: secret of GitHub webhooks (overrides --webhook-secret)"`
	WebhookSecretGitLab   string        `name:"webhook-secret-gitlab" help:"full node: secret of GitLab webhooks (overrides --webhook-secret)"`
	WebhookSecretGitee    string        `name:"webhook-secret-gitee" help:"full node: secret of Gitee webhooks (overrides --webhook-secret)"`
	WebhookAutoAdd        bool          `name:"webhook-auto-add" help:"full node: a signed GitHub or GitLab push for an unknown repository adds it"`
	WebhookCheckSpacing   time.Duration `name:"webhook-check-spacing" help:"full node: after a burst of 5 webhook-triggered checks of one repository, at most one more per this time; pushes in between fold into one check (0: no pacing)"`
	WebhookHostRate       int           `name:"webhook-host-rate" help:"full node: urgent checks a minute of one upstream host, from webhooks and API fetches together, after a burst of --webhook-host-burst (over it: 429 with Retry-After; 0: no bound)"`
	WebhookHostBurst      int           `name:"webhook-host-burst" help:"full node: urgent checks of one upstream host that may start back to back before --webhook-host-rate spaces them"`
	EventsWebhook         List          `name:"events-webhook" help:"full node: a URL that receives every ref update as a POST (repeatable)"`
	EventsWebhookSecret   string        `name:"events-webhook-secret" help:"full node: secret that signs outgoing event POSTs (X-Gitfleet-Signature-256)"`
	Alert                 List          `name:"alert" help:"full node: where alerts go (repeatable): a URL of a JSON webhook, Slack, DingTalk or Lark/Feishu bot, or smtp://user:pass@host:port?from=...&to=... (see Alerts)"`
	AlertInterval         time.Duration `name:"alert-interval" help:"full node: how often the alert rules are evaluated"`
	AlertFor              time.Duration `name:"alert-for" help:"full node: how long failing repositories, stale repositories or a full disk must last before their alert fires"`
	AlertFailingShare     float64       `name:"alert-failing-share" help:"full node: alert when more than this share of repositories are failing"`
	AlertStaleShare       float64       `name:"alert-stale-share" help:"full node: alert when more than this share of repositories were not verified against their upstreams within --alert-stale-after"`
	AlertStaleAfter       time.Duration `name:"alert-stale-after" help:"full node: a repository whose verified_at is this old is stale (0: --max-interval)"`
	AlertNoSession        time.Duration `name:"alert-no-session" help:"full node: alert when the full node has had no session with the coordinator, or the coordinators no leader, for this long"`
	MemoryLimit           string        `name:"memory-limit" help:"soft memory limit of the process, e.g. 256MiB (Go's GOMEMLIMIT; empty: none)"`
	LogLevel              string        `name:"log-level" help:"debug, info, warn or error"`
}

// Defaults that the packages of the roles also apply to a zero value of
// their own settings, so that a role built without this package (a test,
// the simulator, the demo) behaves as the binary does. Each is kept here
// only.
const (
	// DefaultCatalogInterval is how often the coordinator fetches the catalog.
	DefaultCatalogInterval = 5 * time.Minute
	// DefaultFetchers is how many checks and fetches a node runs at once.
	DefaultFetchers = 10
	// DefaultGitTimeout is the longest a single git process may run.
	DefaultGitTimeout = 30 * time.Minute
	// DefaultMaxPurge is the largest share of all repositories that catalog
	// changes may remove within the purge window without an operator's
	// confirmation.
	DefaultMaxPurge = 0.05
)

// Default returns the defaults: a setting left out keeps these.
func Default() Config {
	return Config{
		Data:              "gitfleet-data",
		CatalogInterval:   DefaultCatalogInterval,
		HTTP:              "127.0.0.1:8080",
		GRPC:              "127.0.0.1:7070",
		Coordinator:       List{"127.0.0.1:7070"},
		Mode:              "partial",
		Capacity:          1,
		Tunnel:            "127.0.0.1:7071",
		EtcdPrefix:        "/gitfleet",
		EtcdLease:         10 * time.Second,
		EtcdCompaction:    5 * time.Minute,
		Grace:             10 * time.Minute,
		Warmup:            10 * time.Minute,
		Heartbeat:         5 * time.Second,
		MaxPurge:          DefaultMaxPurge,
		PurgeWindow:       24 * time.Hour,
		LoadFactor:        1.25,
		AssignBatch:       500,
		MaxClonesInFlight: 50,
		MaxInterval:       24 * time.Hour,
		MinInterval:       time.Minute,
		Policy:            "adaptive",
		FullDiskPolicy:    "refuse-new",
		Fetchers:          DefaultFetchers,
		HostConcurrency:   6,
		GitTimeout:        DefaultGitTimeout,
		EgressSchemes:     List{"https", "http"},
		MaxRepoSize:       "10GiB",
		MaxRefs:           50000,
		MaxRefLength:      1024,
		GitMemoryLimit:    "2GiB",
		MaxTreeDepth:      2048,
		VerifyInterval:    7 * 24 * time.Hour,
		PruneAfter:        time.Hour,

		MaintConcurrency:     1,
		MaintDuty:            0.1,
		MaintFullInterval:    7 * 24 * time.Hour,
		Retention:            7 * 24 * time.Hour,
		MismatchRevoke:       3,
		StaleRevoke:          10,
		ForgeRequestsPerHour: 4000,
		ForgeBackoff:         10 * time.Second,
		SpotCheckPerHour:     60,
		HintWait:             3 * time.Minute,
		AlertInterval:        15 * time.Second,
		AlertFor:             5 * time.Minute,
		AlertFailingShare:    0.05,
		AlertStaleShare:      0.05,
		AlertNoSession:       2 * time.Minute,
		LogPerRepo:           100,
		LogMaxAge:            30 * 24 * time.Hour,
		LogLevel:             "info",

		// The public edge.
		ServeMaxRequest:     "8MiB",
		ServeReadTimeout:    10 * time.Second,
		ServeIdleTimeout:    time.Minute,
		ServeTipGrace:       30 * time.Second,
		ServeMaxUploadPacks: 32,
		ServeMaxPerRepo:     8,
		// The last of 32 clones from one address waits for 28 before it,
		// served 4 at a time: 28 × 60 MB over a 100 Mbit/s link take over
		// two minutes. Twice that, and git, which does not
		// retry, is better told to come back.
		ServeQueueWait:      5 * time.Minute,
		ServeQueueLength:    128,
		ServeMaxPerClient:   4,
		ServePackCacheSize:  "1GiB",
		ServePackCacheTTL:   5 * time.Minute,
		WebhookCheckSpacing: 5 * time.Second,
		WebhookHostRate:     600,
		WebhookHostBurst:    100,
	}
}

// Field describes one setting, for docs/configuration.md and for help.
type Field struct {
	Name, Type, Default, Help string
}

// Fields lists every setting with its default.
func Fields() []Field {
	d := Default()
	v := reflect.ValueOf(d)
	t := v.Type()
	out := make([]Field, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		out = append(out, Field{Name: f.Tag.Get("name"), Type: typeName(f.Type), Default: format(v.Field(i)), Help: f.Tag.Get("help")})
	}
	return out
}

// List is a setting that may be given several times (a repeated flag, a
// YAML list, or comma-separated values).
type List []string

func (l List) String() string { return strings.Join(l, ",") }

// listFlag sets a List from flags: the first flag replaces what the YAML
// file said, later ones add to it.
type listFlag struct {
	l       *List
	touched bool
}

func (f *listFlag) String() string {
	if f.l == nil {
		return ""
	}
	return f.l.String()
}

func (f *listFlag) Set(v string) error {
	if !f.touched {
		*f.l, f.touched = nil, true
	}
	*f.l = append(*f.l, splitList(v)...)
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	listType     = reflect.TypeOf(List(nil))
)

func typeName(t reflect.Type) string {
	switch t {
	case durationType:
		return "duration"
	case listType:
		return "list"
	}
	return t.Kind().String()
}

func format(v reflect.Value) string {
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	return fmt.Sprint(v.Interface())
}

// Load builds the configuration of one command: defaults, then the YAML
// file named by --config (if any), then the flags in args. The flag set is
// returned so that callers can read the positional arguments. A default
// that contradicts a setting the user gave yields to it (see
// resolveIntervals).
func Load(name string, args []string) (Config, *flag.FlagSet, error) {
	cfg := Default()
	g := given{}
	if p := configPath(args); p != "" {
		if err := cfg.loadYAML(p, g); err != nil {
			return cfg, nil, err
		}
	}
	if cfg.JoinToken == "" {
		cfg.JoinToken = os.Getenv("GITFLEET_JOIN_TOKEN")
	}
	if cfg.FullToken == "" {
		cfg.FullToken = os.Getenv("GITFLEET_FULL_TOKEN")
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.String("config", "", "YAML configuration file (flags override it)")
	cfg.register(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, fs, err
	}
	g.flagsGiven(fs)
	if cfg.Data != "" {
		// git runs in a neutral directory (package gitcmd), so a relative
		// data directory would name another place to it than to gitfleet.
		abs, err := filepath.Abs(cfg.Data)
		if err != nil {
			return cfg, fs, fmt.Errorf("config: data: %w", err)
		}
		cfg.Data = abs
	}
	return cfg, fs, cfg.resolveIntervals(g)
}

func configPath(args []string) string {
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "config="); ok {
			return v
		}
		if a == "config" && i+1 < len(args) {
			return args[i+1]
		}
		if args[i] == "--" {
			break
		}
	}
	return ""
}

func (c *Config) loadYAML(path string, g given) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var raw map[string]yaml.Node
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	byName := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		byName[t.Field(i).Tag.Get("name")] = i
	}
	for k, node := range raw {
		i, ok := byName[k]
		if !ok {
			return fmt.Errorf("config %s:%d: unknown key %q", path, node.Line, k)
		}
		g[k] = true
		if v.Field(i).Type() == listType {
			var l List
			if node.Kind == yaml.SequenceNode {
				for _, item := range node.Content {
					l = append(l, splitList(item.Value)...)
				}
			} else {
				l = splitList(node.Value)
			}
			v.Field(i).Set(reflect.ValueOf(l))
			continue
		}
		if err := set(v.Field(i), node.Value); err != nil {
			return fmt.Errorf("config %s:%d: %s: %w", path, node.Line, k, err)
		}
	}
	return nil
}

func set(f reflect.Value, s string) error {
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(s)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		f.SetInt(int64(n))
	case f.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	default:
		return errors.New("unsupported type")
	}
	return nil
}

// register binds every field to a flag, with the current value as default.
func (c *Config) register(fs *flag.FlagSet) {
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, help := f.Tag.Get("name"), f.Tag.Get("help")
		p := v.Field(i).Addr().Interface()
		switch p := p.(type) {
		case *time.Duration:
			fs.DurationVar(p, name, *p, help)
		case *string:
			fs.StringVar(p, name, *p, help)
		case *bool:
			fs.BoolVar(p, name, *p, help)
		case *int:
			fs.IntVar(p, name, *p, help)
		case *float64:
			fs.Float64Var(p, name, *p, help)
		case *List:
			fs.Var(&listFlag{l: p}, name, help)
		}
	}
}

// Markdown renders the settings as the table of docs/configuration.md
// (`gitfleet help config` prints it).
func Markdown() string {
	var b strings.Builder
	b.WriteString("| flag / YAML key | type | default | what it sets |\n|---|---|---|---|\n")
	for _, f := range Fields() {
		d := "`" + f.Default + "`"
		if f.Default == "" {
			d = "(none)"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, f.Type, d, f.Help)
	}
	return b.String()
}

// ParseBytes reads a size such as "256MiB", "1GiB", "300MB" or "1048576".
func ParseBytes(in string) (int64, error) {
	s := strings.TrimSpace(in)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q (want a whole number and a unit: B, KB, MB, GB, KiB, MiB or GiB, e.g. 256MiB)", in)
	}
	return n * mult, nil
}
