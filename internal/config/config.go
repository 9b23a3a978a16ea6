// Package config is gitfleet's configuration: one struct with defaults that
// work, loaded from a YAML file (--config) and then from flags, every key
// being both. Each setting names the roles it applies to, and each command
// takes the settings of its roles only (commands.go), with a help grouped
// by topic. The table in docs/configuration.md is checked against it by a
// test, so the two cannot drift apart.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/ring"
	"github.com/gitfleet/gitfleet/internal/schedule"
	"go.yaml.in/yaml/v3"
)

// Config holds every setting of every role. The `name` tag is both the YAML
// key and the flag name; `help` is the flag's usage and the text of docs/configuration.md.
// `roles` lists the roles the setting applies to (the commands that take
// it), `topic` its group in a command's help, and `essential` the roles
// whose help shows it first.
type Config struct {
	Data                  string        `name:"data" roles:"coordinator,partial,full,up" topic:"storage" essential:"coordinator,partial,full,up" help:"data directory (state, mirrors)"`
	Catalog               string        `name:"catalog" roles:"coordinator,up" topic:"catalog" essential:"coordinator,up" help:"catalog repository: a git URL or a local path"`
	CatalogInterval       time.Duration `name:"catalog-interval" roles:"coordinator,up" topic:"catalog" help:"how often the catalog is re-fetched"`
	ListerInterval        time.Duration `name:"lister-interval" roles:"coordinator,up" topic:"catalog" help:"how often each lister line of the catalog (https://github.com/ORG/*) has its owner's repositories listed again through the forge's API, within the feed's request budget (and at the start when due)"`
	HTTP                  string        `name:"http" roles:"full,up,demo" topic:"serve" essential:"full,up,demo" help:"public HTTP address: git, API, console"`
	Metrics               string        `name:"metrics" roles:"coordinator,partial,full" topic:"process" help:"address to serve Prometheus metrics at /metrics, e.g. 127.0.0.1:9090 (empty: none; a full node and up serve them on --http)"`
	Pprof                 string        `name:"pprof" roles:"coordinator,partial,full,up" topic:"process" help:"address to serve Go's runtime profiles at /debug/pprof/, e.g. 127.0.0.1:6060 (empty: none; keep it private, it shows the process's internals)"`
	GRPC                  string        `name:"grpc" roles:"coordinator,up" topic:"fleet" essential:"coordinator,up" help:"listen address for nodes (gRPC)"`
	Coordinator           List          `name:"coordinator" roles:"partial,full" topic:"fleet" essential:"partial,full" help:"the coordinator's gRPC address (host:port); several for coordinators that share a fleet through etcd"`
	JoinToken             string        `name:"join-token" roles:"coordinator,partial,up" topic:"fleet" essential:"coordinator,partial,up" help:"shared secret that admits new partial nodes (env GITFLEET_JOIN_TOKEN); the coordinator takes a comma-separated list, to rotate it; up makes one at its first start and keeps it in <data>/join-token, unless it shares a fleet through --etcd"`
	FullToken             string        `name:"full-token" roles:"coordinator,full,up" topic:"fleet" essential:"coordinator,full" help:"the second secret that admits full nodes, never given to volunteers (env GITFLEET_FULL_TOKEN); up makes its own unless it shares a fleet through --etcd"`
	Mode                  string        `name:"mode" roles:"partial,full" topic:"fleet" essential:"partial,full" help:"partial (a worker) or full (the aggregator)"`
	Name                  string        `name:"name" roles:"partial,full,up" topic:"fleet" help:"a name for people (default: the host name)"`
	Capacity              float64       `name:"capacity" roles:"partial,full,up" topic:"fleet" essential:"partial" help:"placement weight, 1 = a standard node; 0 = a full node that fetches nothing itself"`
	Tunnel                string        `name:"tunnel" roles:"full,up" topic:"serve" essential:"full,up" help:"listen address for partial nodes' tunnels"`
	TunnelAdvertise       string        `name:"tunnel-advertise" roles:"full,up" topic:"serve" essential:"full,up" help:"tunnel address given to partial nodes (default: the bound --tunnel address)"`
	PublicURL             string        `name:"public-url" roles:"full,up" topic:"serve" essential:"full,up" help:"base URL of the mirror shown in clone URLs (default: from the request)"`
	ServeMaxRequest       string        `name:"serve-max-request" roles:"full,up" topic:"serve" help:"largest git fetch request, after decompression (over it: 413)"`
	ServeIdleTimeout      time.Duration `name:"serve-idle-timeout" roles:"full,up" topic:"serve" help:"longest time a git upload-pack serving one client may go without progress (a client that stops reading)"`
	ServeTipGrace         time.Duration `name:"serve-tip-grace" roles:"full,up" topic:"serve" help:"how long a tip a protocol v2 ref listing advertised may still be fetched after a force-push moved the ref away, while its object is on disk (a clone racing the push; negative: none)"`
	ServeReadTimeout      time.Duration `name:"serve-read-timeout" roles:"full,up" topic:"serve" help:"longest time a client may take to send a request body: a git fetch request, an API call, a webhook delivery (over it: 408)"`
	ServeMaxUploadPacks   int           `name:"serve-max-upload-packs" roles:"full,up" topic:"serve" help:"git upload-pack runs at once (over it: a wait in the queue, then 503 with Retry-After; 0: no cap)"`
	ServeMaxPerRepo       int           `name:"serve-max-per-repo" roles:"full,up" topic:"serve" help:"git upload-pack runs at once for one repository (over it: as --serve-max-upload-packs; 0: no cap)"`
	ServeQueueWait        time.Duration `name:"serve-queue-wait" roles:"full,up" topic:"serve" help:"longest wait of a git request, for its turn behind its client's other requests and then for a run slot together (past it: 429, or 503 for a run slot, with Retry-After; 0: no wait)"`
	ServeQueueLength      int           `name:"serve-queue-length" roles:"full,up" topic:"serve" help:"git requests that may wait their client's turn, and runs that may wait for a slot (beyond: 429 or 503 at once, but a client with fewer waiting takes the place of the newest request of the client with the most)"`
	ServeMaxPerClient     int           `name:"serve-max-per-client" roles:"full,up" topic:"serve" help:"a client address's share: git requests served to it at once, from a run or the pack cache; more wait their turn, oldest first, for up to --serve-queue-wait (then 429 with Retry-After), their bodies holding at most this many times --serve-max-request (0: no cap)"`
	ServeIdleConnTimeout  time.Duration `name:"serve-idle-conn-timeout" roles:"full,up" topic:"serve" help:"how long the public HTTP server keeps a client's keep-alive connection open with no request on it (0: as long as the client keeps it)"`
	ServeConnsPerClient   int           `name:"serve-max-conns-per-client" roles:"full,up" topic:"serve" help:"connections a client address (an IPv6 /64 counts as one) may hold open to the public HTTP server at once; beyond, a new one is closed as it is accepted, unread (0: no cap)"`
	ServePackCacheSize    string        `name:"serve-pack-cache-size" roles:"full,up" topic:"serve" help:"disk bound of the pack cache in <data>/tmp/packcache, where identical git fetches share one run and its answer is kept (0: no cache)"`
	ServePackCacheTTL     time.Duration `name:"serve-pack-cache-ttl" roles:"full,up" topic:"serve" help:"how long the pack cache keeps an answer that no request uses"`
	ServePackCacheWindow  time.Duration `name:"serve-pack-cache-window" roles:"full,up" topic:"serve" help:"a filtered, shallow or incremental fetch's answer is checked and kept in the pack cache only when another request asks for it while it runs or within this window before (0: 2s; negative: every answer is kept)"`
	TLSCert               string        `name:"tls-cert" roles:"coordinator,full,up" topic:"tls" help:"certificate (PEM) of the gRPC and tunnel listeners; with --tls-key they speak TLS"`
	TLSKey                string        `name:"tls-key" roles:"coordinator,full,up" topic:"tls" help:"the private key (PEM) of --tls-cert"`
	TLS                   bool          `name:"tls" roles:"partial,full,up" topic:"tls" essential:"partial,full" help:"dial the coordinator and full nodes' tunnels over TLS, verified against the system's roots or --tls-ca (up: only with --etcd, to reach the other machines' coordinators)"`
	TLSCA                 string        `name:"tls-ca" roles:"coordinator,partial,full,up" topic:"tls" help:"PEM file of the certificates that sign the coordinator's and full nodes' certificates (implies --tls); https --etcd endpoints are verified against it too"`
	Etcd                  List          `name:"etcd" roles:"coordinator,up" topic:"ha" help:"etcd endpoints (e.g. http://10.0.0.1:2379) where two or three coordinators share the fleet's state; one leads, the others take over"`
	EtcdPrefix            string        `name:"etcd-prefix" roles:"coordinator,up" topic:"ha" help:"the keys of this fleet in etcd start with this prefix"`
	EtcdLease             time.Duration `name:"etcd-lease" roles:"coordinator,up" topic:"ha" help:"how long a leader that stops answering keeps its leadership"`
	EtcdCompaction        time.Duration `name:"etcd-compaction" roles:"coordinator,up" topic:"ha" help:"the leader compacts etcd's history this often, to the revision of one interval before (0: leave it to etcd's auto-compaction)"`
	Advertise             string        `name:"advertise" roles:"coordinator,up" topic:"ha" help:"with --etcd: this coordinator's gRPC address as nodes reach it (default: the --grpc address, if it names a host)"`
	Grace                 time.Duration `name:"grace" roles:"coordinator,up" topic:"fleet" help:"how long a silent node keeps its repositories"`
	Warmup                time.Duration `name:"warmup" roles:"coordinator,up" topic:"fleet" help:"how long a coordinator with no stored state waits for nodes before placing"`
	WarmupNodes           int           `name:"warmup-nodes" roles:"coordinator,up" topic:"fleet" help:"end the warm-up early once this many nodes are alive (0: time only)"`
	Heartbeat             time.Duration `name:"heartbeat" roles:"coordinator,up" topic:"fleet" help:"how often nodes send heartbeats (a node is suspect after 3 missed)"`
	LoadFactor            float64       `name:"load-factor" roles:"coordinator,up" topic:"fleet" help:"no node holds more than this many times its fair share of repositories"`
	FullReplicas          int           `name:"full-replicas" roles:"coordinator,up" topic:"fleet" help:"full nodes that hold each repository (a fork network as one); with fewer full nodes, each holds everything. a full node pulls only the repositories placed on it (replicas in the API) and relays git requests for the others to a replica"`
	AssignBatch           int           `name:"assign-batch" roles:"coordinator,up" topic:"fleet" help:"repositories per assignment message on a node's session"`
	MaxClonesInFlight     int           `name:"max-clones-in-flight" roles:"coordinator,up" topic:"fleet" help:"clones a node is asked to make at once; more follow as it confirms them or they fail (a failed clone frees its slot; the node retries it on its own backoff)"`
	MaxPurge              float64       `name:"max-purge" roles:"coordinator,up" topic:"catalog" help:"largest share of repositories that catalog changes, and entries a restart's egress policy now refuses, may remove within --purge-window without confirmation (more is held; the rest of the change is applied)"`
	PurgeWindow           time.Duration `name:"purge-window" roles:"coordinator,up" topic:"catalog" help:"the sliding window over which removals are counted against --max-purge"`
	MaxInterval           time.Duration `name:"max-interval" roles:"coordinator,partial,full,up" topic:"freshness" help:"the longest a repository may go unchecked"`
	FedMaxInterval        time.Duration `name:"fed-max-interval" roles:"partial,full,up" topic:"freshness" help:"the longest a repository may go unchecked by its node when the coordinator says its host's forge feed works (the feed asks about it at least every --max-interval; 0: the longer of 7 days and --max-interval)"`
	ArchivedInterval      time.Duration `name:"archived-interval" roles:"partial,full,up" topic:"freshness" help:"the longest a repository that its forge marks archived (read-only; a forge feed says so) goes unchecked by its node; pushes a feed sees still come at once (not shorter than --max-interval)"`
	MinInterval           time.Duration `name:"min-interval" roles:"coordinator,partial,full,up" topic:"freshness" help:"the shortest time between two background checks of one repository (if unset and --max-interval is under 4m: a quarter of it)"`
	Budget                float64       `name:"budget" roles:"partial,full,up" topic:"freshness" help:"background upstream checks per hour (0: unlimited)"`
	MaxBandwidth          string        `name:"max-bandwidth" roles:"partial,full" topic:"volunteer" essential:"partial" help:"the most bytes a second the node moves, its downloads from upstreams and its uploads to full nodes together, e.g. 20Mbit or 2MiB/s (empty: no cap; upstreams over git:// and ssh:// are not paced); the coordinator asks a capped node for fewer clones at once"`
	ActiveHours           string        `name:"active-hours" roles:"partial,full" topic:"volunteer" essential:"partial" help:"the hours, HH:MM-HH:MM in the machine's time zone (e.g. 01:00-07:00, or 22:00-06:00 across midnight), outside which the node starts no background checks, maintenance or verification, and the coordinator gives it new repositories only when no other node can take them; urgent checks (first clones, on-demand, webhooks) still run (empty: always)"`
	DeclineUrgent         bool          `name:"decline-urgent-outside-hours" roles:"partial,full" topic:"volunteer" help:"outside --active-hours, urgent checks (first clones, on-demand and webhook checks) wait for the hours too"`
	DiskQuota             string        `name:"disk-quota" roles:"partial,full,up" topic:"limits" essential:"partial" help:"space the mirrors may use (on a full node, with the data kept for --retention and the pack cache), e.g. 500GiB (default: the whole file system); above 85% the node takes no new repositories"`
	FullDiskPolicy        string        `name:"full-disk-policy" roles:"full,up" topic:"limits" help:"what yields above the disk high water: refuse-new (no first pulls or clones of new repositories; updates go on) or refuse-all (no pulls or fetches)"`
	HostLimit             List          `name:"host-limit" roles:"partial,full,up" topic:"freshness" help:"a per-host check limit, e.g. github.com=5000/h (repeat the flag, or a YAML list, for several hosts)"`
	Policy                string        `name:"policy" roles:"partial,full,up" topic:"freshness" help:"freshness policy: adaptive, fixed, compass or sourcegraph"`
	Fetchers              int           `name:"fetchers" roles:"partial,full,up" topic:"freshness" help:"checks and fetches running at once"`
	HostConcurrency       int           `name:"host-concurrency" roles:"partial,full,up" topic:"freshness" help:"checks and fetches running at once against one upstream host (0: no cap but --fetchers)"`
	GitTimeout            time.Duration `name:"git-timeout" roles:"partial,full,up" topic:"limits" help:"longest a single git process may run"`
	MaxRepoSize           string        `name:"max-repo-size" roles:"partial,full,up" topic:"limits" help:"the most one mirror may hold on disk, e.g. 10GiB (0: no limit); a fetch that would pass it is stopped while the pack streams in"`
	MaxRefs               int           `name:"max-refs" roles:"partial,full,up" topic:"limits" help:"the most branches and tags a repository may have (0: no limit); above it the repository is not fetched"`
	MaxRefLength          int           `name:"max-ref-length" roles:"partial,full,up" topic:"limits" help:"the longest ref name mirrored, in bytes (0: no limit); longer refs are skipped and the rest mirrored"`
	GitMemoryLimit        string        `name:"git-memory-limit" roles:"partial,full,up" topic:"limits" help:"memory (data segment) each git process may allocate, e.g. 2GiB (0: no limit; Linux only)"`
	MaxTreeDepth          int           `name:"max-tree-depth" roles:"partial,full,up" topic:"limits" help:"deepest tree git may walk (core.maxTreeDepth; needs git 2.43, logged at start when missing; 0: git's default)"`
	AllowPrivateUpstreams bool          `name:"allow-private-upstreams" roles:"coordinator,partial,full,up" topic:"egress" help:"shorthand: upstreams and webhooks may reach loopback and private networks and localhost names, on any port (tests, demo)"`
	EgressAllow           List          `name:"egress-allow" roles:"coordinator,partial,full,up" topic:"egress" help:"CIDR prefixes, addresses, host names or *.suffixes that upstreams and webhooks may reach although the egress policy refuses them, on any port, e.g. 10.1.0.0/16 or git.corp.example (repeatable)"`
	Forge                 List          `name:"forge" roles:"coordinator,up" topic:"feeds" help:"a forge whose change feed tells of pushes, HOST=KIND[,api=URL] with KIND {forge-kinds} (repeatable; {forge-hosts} are configured already; see docs/forges.md)"`
	ForgeToken            List          `name:"forge-token" roles:"coordinator,up" topic:"feeds" help:"a token of a forge's API, HOST=TOKEN (repeatable, used in turn; also env GITFLEET_FORGE_TOKENS); never sent to nodes, logged or shown"`
	ForgeBackoff          time.Duration `name:"forge-backoff" roles:"coordinator,up" topic:"feeds" help:"how long a forge's change feed waits after a failed request, doubling with each failure in a row up to 30m"`
	ForgeRequestsPerHour  float64       `name:"forge-requests-per-hour" roles:"coordinator,up" topic:"feeds" help:"the most requests a forge's change feed makes an hour, per token: a ceiling, the feed asks only about repositories due and leaves the rest of the budget unspent"`
	ForgeMinAskInterval   time.Duration `name:"forge-min-ask-interval" roles:"coordinator,up" topic:"feeds" help:"the least time between two asks of a forge's change feed about one repository (a forge's longer X-Poll-Interval wins)"`
	FedMaxAge             time.Duration `name:"fed-max-age" roles:"coordinator,up" topic:"feeds" help:"how long a forge feed's answer for a repository keeps it fed (its node's background checks a safety net); past it, or never answered, it is checked as unfed, and a feed held by a rate limit this long is feed-limited (0: twice the repository's planned ask interval)"`
	CaseInsensitiveHost   List          `name:"case-insensitive-host" roles:"coordinator,full,up" topic:"catalog" help:"a host whose repository paths are case-insensitive, so that keys of its repositories are lower-cased, as github.com's and gitee.com's always are (repeatable; give it to the coordinator and every full node alike)"`
	EgressSchemes         List          `name:"egress-schemes" roles:"coordinator,partial,full,up" topic:"egress" help:"URL schemes upstreams may use: https, http, git, ssh (git and ssh: see Safety)"`
	EgressPorts           List          `name:"egress-ports" roles:"coordinator,partial,full,up" topic:"egress" help:"ports upstreams and webhooks may use besides their schemes' own (443, 80; git 9418, ssh 22)"`
	DNSServer             string        `name:"dns-server" roles:"partial,full,up" topic:"egress" help:"host:port of the DNS server that names of upstreams and webhooks are resolved with (default: the system's resolver)"`
	VerifyInterval        time.Duration `name:"verify-interval" roles:"partial,full,up" topic:"storage" help:"each mirror is verified in the background about this often, one at a time, at most 10% of the time (0: never)"`
	PruneAfter            time.Duration `name:"prune-after" roles:"partial,full,up" topic:"storage" help:"a mirror whose upstream deleted a ref or rewrote one (not a fast-forward) is repacked without the objects no ref reaches within this time, so they can no longer be fetched (0: at once)"`
	MaintConcurrency      int           `name:"maintenance-concurrency" roles:"partial,full,up" topic:"storage" help:"mirrors maintained at once in the background (repacked geometrically with a bitmap, commit graph written), chosen by need after fetches (0: no maintenance)"`
	MaintDuty             float64       `name:"maintenance-duty" roles:"partial,full,up" topic:"storage" help:"the most of the time each maintenance lane may be busy (0.1: at most 10%)"`
	MaintFullInterval     time.Duration `name:"maintenance-full-interval" roles:"partial,full,up" topic:"storage" help:"a mirror written to since its last full repack is repacked in full once this long has passed, which drops the objects no ref reaches (what --prune-after does not already drop)"`
	Retention             time.Duration `name:"retention" roles:"partial,full,up" topic:"storage" help:"how long a removed repository's data (full node) and the old tips of an emptied upstream are kept, so that re-adding it needs no clone and a deletion can be undone"`
	ArchiveRewrites       bool          `name:"archive-rewrites" roles:"partial,full,up" topic:"storage" help:"every mirror keeps the tips that an upstream's force-push or deletion takes away, hidden, under refs/archive/<unix-time>/<ref> (fetched by id, listed by the API); without it only catalog entries with archive: true do"`
	ArchiveRetention      time.Duration `name:"archive-retention" roles:"partial,full,up" topic:"storage" help:"how long an archive ref (see --archive-rewrites) is kept; maintenance deletes older ones and the next prune drops what they kept (0: forever)"`
	ArchiveMaxRefs        int           `name:"archive-max-refs" roles:"partial,full,up" topic:"storage" help:"the most archive refs a repository keeps (an upstream that force-pushes in a loop cannot grow them without bound): the oldest go first"`
	MismatchRevoke        int           `name:"mismatch-revoke" roles:"full,up" topic:"trust" help:"revoke a partial node after it served this many tips the upstream never had (0: never)"`
	StaleRevoke           int           `name:"stale-revoke" roles:"full,up" topic:"trust" help:"revoke a partial node after this many stale reports: repositories it reported unchanged after a push that the full node then found upstream (0: never)"`
	SpotCheckPerHour      int           `name:"spot-check-per-hour" roles:"full,up" topic:"trust" help:"repositories checked against their upstreams by the full node itself each hour, the oldest verified_at first, on hosts without a forge feed (0: none)"`
	HintWait              time.Duration `name:"hint-wait" roles:"full,up" topic:"trust" help:"how long an owner has to bring a change that a webhook or forge feed told of before the full node asks the upstream itself"`
	FullMoveConcurrency   int           `name:"full-move-concurrency" roles:"full,up" topic:"fleet" help:"repositories a full node copies from other full nodes at once (a join, a lost full node's share, a repair), so that moves do not starve public serving or the pulls from owners (at least 1)"`
	LogPerRepo            int           `name:"log-per-repo" roles:"partial,full,up" topic:"storage" help:"entries of the fetch log kept per repository (the newest)"`
	LogMaxAge             time.Duration `name:"log-max-age" roles:"partial,full,up" topic:"storage" help:"entries of the fetch log older than this are dropped"`
	APIToken              string        `name:"api-token" roles:"full,up" topic:"api" help:"bearer token for API writes (default: generated at first start, kept in <data>/api-token)"`
	WebhookSecret         string        `name:"webhook-secret" roles:"full,up" topic:"api" help:"secret of incoming webhooks, for every host"`
	WebhookSecrets        PerForge      `name:"webhook-secret-{kind}" roles:"full,up" topic:"api" help:"secret of {forge} webhooks (overrides --webhook-secret)"`
	WebhookAutoAdd        bool          `name:"webhook-auto-add" roles:"full,up" topic:"api" help:"a signed {auto-add-forges} push for an unknown repository adds it"`
	WebhookCheckSpacing   time.Duration `name:"webhook-check-spacing" roles:"full,up" topic:"api" help:"after a burst of 5 webhook-triggered checks of one repository, at most one more per this time; pushes in between fold into one check (0: no pacing)"`
	WebhookHostRate       int           `name:"webhook-host-rate" roles:"full,up" topic:"api" help:"urgent checks a minute of one upstream host, from webhooks and API fetches together, after a burst of --webhook-host-burst (over it: 429 with Retry-After; 0: no bound)"`
	WebhookHostBurst      int           `name:"webhook-host-burst" roles:"full,up" topic:"api" help:"urgent checks of one upstream host that may start back to back before --webhook-host-rate spaces them"`
	EventsWebhook         List          `name:"events-webhook" roles:"full,up" topic:"api" help:"a URL that receives every ref update as a POST (repeatable)"`
	EventsWebhookSecret   string        `name:"events-webhook-secret" roles:"full,up" topic:"api" help:"secret that signs outgoing event POSTs (X-Gitfleet-Signature-256)"`
	Alert                 List          `name:"alert" roles:"full,up" topic:"alerts" help:"where alerts go (repeatable): a URL of a JSON webhook, Slack, DingTalk or Lark/Feishu bot, or smtp://user:pass@host:port?from=...&to=... (see Alerts)"`
	AlertInterval         time.Duration `name:"alert-interval" roles:"full,up" topic:"alerts" help:"how often the alert rules are evaluated"`
	AlertFor              time.Duration `name:"alert-for" roles:"full,up" topic:"alerts" help:"how long failing repositories, stale repositories, a full disk, a failing forge feed or an unreadable catalog must last before their alert fires"`
	AlertFailingShare     float64       `name:"alert-failing-share" roles:"full,up" topic:"alerts" help:"alert when more than this share of repositories are failing"`
	AlertStaleShare       float64       `name:"alert-stale-share" roles:"full,up" topic:"alerts" help:"alert when more than this share of repositories were not verified against their upstreams within --alert-stale-after"`
	AlertStaleAfter       time.Duration `name:"alert-stale-after" roles:"full,up" topic:"alerts" help:"a repository whose verified_at is this old is stale (0: --max-interval)"`
	AlertNoSession        time.Duration `name:"alert-no-session" roles:"full,up" topic:"alerts" help:"alert when the full node has had no session with the coordinator, or the coordinators no leader, for this long"`
	MemoryLimit           string        `name:"memory-limit" roles:"coordinator,partial,full,up" topic:"process" help:"soft memory limit of the process, e.g. 256MiB (Go's GOMEMLIMIT; empty: none)"`
	LogLevel              string        `name:"log-level" roles:"coordinator,partial,full,up,demo" topic:"process" help:"debug, info, warn or error"`
}

// Defaults that the packages of the roles also apply to a zero value of
// their own settings, so that a role built without this package (a test,
// the simulator, the demo) behaves as the binary does. Each is kept here
// only; the defaults of the pure cores (schedule, ring, placement,
// membership), which may not import this package, are theirs, and this
// package takes them (Default).
const (
	// DefaultCatalogInterval is how often the coordinator fetches the catalog.
	DefaultCatalogInterval = 5 * time.Minute
	// DefaultListerInterval is how often the coordinator lists a lister
	// line's owner again.
	DefaultListerInterval = 6 * time.Hour
	// DefaultHeartbeat is how often nodes send heartbeats.
	DefaultHeartbeat = 5 * time.Second
	// DefaultAssignBatch is the most assignments one message carries.
	DefaultAssignBatch = 500
	// DefaultPurgeWindow is the sliding window over which catalog removals
	// are counted against DefaultMaxPurge.
	DefaultPurgeWindow = 24 * time.Hour
	// DefaultFetchers is how many checks and fetches a node runs at once.
	DefaultFetchers = schedule.DefaultConcurrency
	// DefaultGitTimeout is the longest a single git process may run.
	DefaultGitTimeout = 30 * time.Minute
	// DefaultMaxPurge is the largest share of all repositories that catalog
	// changes may remove within the purge window without an operator's
	// confirmation.
	DefaultMaxPurge = 0.05
)

// Default returns the defaults: a setting left out keeps these.
func Default() Config {
	members := membership.DefaultConfig()
	return Config{
		Data:              "gitfleet-data",
		CatalogInterval:   DefaultCatalogInterval,
		ListerInterval:    DefaultListerInterval,
		HTTP:              "127.0.0.1:8080",
		GRPC:              "127.0.0.1:7070",
		Coordinator:       List{"127.0.0.1:7070"},
		Mode:              "partial",
		Capacity:          1,
		Tunnel:            "127.0.0.1:7071",
		EtcdPrefix:        "/gitfleet",
		EtcdLease:         10 * time.Second,
		EtcdCompaction:    5 * time.Minute,
		Grace:             members.Grace,
		Warmup:            members.Warmup,
		Heartbeat:         DefaultHeartbeat,
		MaxPurge:          DefaultMaxPurge,
		PurgeWindow:       DefaultPurgeWindow,
		LoadFactor:        ring.DefaultLoadFactor,
		AssignBatch:       DefaultAssignBatch,
		MaxClonesInFlight: placement.DefaultMaxInFlight,
		FullReplicas:      placement.DefaultReplicas,
		MaxInterval:       24 * time.Hour,
		ArchivedInterval:  30 * 24 * time.Hour,
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
		ArchiveMaxRefs:       1000, // mirror.DefaultArchiveMaxRefs
		MismatchRevoke:       3,
		StaleRevoke:          10,
		ForgeRequestsPerHour: 4000,
		ForgeMinAskInterval:  time.Minute,
		ForgeBackoff:         10 * time.Second,
		SpotCheckPerHour:     60,
		HintWait:             3 * time.Minute,
		FullMoveConcurrency:  2,
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
		ServeQueueWait:       5 * time.Minute,
		ServeQueueLength:     128,
		ServeMaxPerClient:    4,
		ServePackCacheSize:   "1GiB",
		ServePackCacheTTL:    5 * time.Minute,
		ServePackCacheWindow: 2 * time.Second,
		WebhookCheckSpacing:  5 * time.Second,
		WebhookHostRate:      600,
		WebhookHostBurst:     100,
		// A browser opens 6 connections a host, a CI farm behind one
		// address some dozens; 4,000 held idle took 62 MB (issue 33).
		ServeIdleConnTimeout: time.Minute,
		ServeConnsPerClient:  64,
	}
}

// Field describes one setting, for docs/configuration.md and for help.
type Field struct {
	Name, Type, Default, Help string
	// Roles are the roles it applies to; Essential those whose help shows
	// it first; Topic its group in help.
	Roles, Essential []Role
	Topic            string
}

// Fields lists every setting with its default.
func Fields() []Field {
	d := Default()
	all := settings()
	out := make([]Field, 0, len(all))
	for _, s := range all {
		out = append(out, Field{Name: s.name, Type: typeName(s.field.Type), Default: s.value(&d), Help: s.help,
			Roles: s.roles(), Essential: parseRoles(s.field.Tag.Get("essential")), Topic: s.field.Tag.Get("topic")})
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
	case perForgeType:
		return "string"
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
// file named by --config (if any), then the flags in args. The command
// takes the settings of its roles only: a flag of another command, an
// unknown flag or a positional argument is a *UsageError, a YAML key of
// another command an error that names the key. -h gives flag.ErrHelp (the
// caller prints Help). A default that contradicts a setting the user gave
// yields to it (see resolveIntervals).
func Load(cmd Command, args []string) (Config, error) {
	cfg := Default()
	g := given{}
	if p := configPath(args); p != "" {
		if err := cfg.loadYAML(p, cmd, g); err != nil {
			return cfg, err
		}
	}
	if cfg.JoinToken == "" {
		cfg.JoinToken = os.Getenv("GITFLEET_JOIN_TOKEN")
	}
	if cfg.FullToken == "" {
		cfg.FullToken = os.Getenv("GITFLEET_FULL_TOKEN")
	}
	fs := flag.NewFlagSet("gitfleet "+cmd.Name, flag.ContinueOnError)
	// The caller prints one line for an error, and Help for -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.String("config", "", "YAML configuration file (flags override it)")
	cfg.register(fs, cmd)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, flagError(cmd, err)
	}
	if fs.NArg() > 0 {
		return cfg, &UsageError{Command: cmd.Name, Msg: fmt.Sprintf("unexpected argument %q: %s takes flags only", fs.Arg(0), cmd.Name)}
	}
	g.flagsGiven(fs)
	if cfg.Data != "" {
		// git runs in a neutral directory (package gitcmd), so a relative
		// data directory would name another place to it than to gitfleet.
		abs, err := filepath.Abs(cfg.Data)
		if err != nil {
			return cfg, fmt.Errorf("config: data: %w", err)
		}
		cfg.Data = abs
	}
	return cfg, cfg.resolveIntervals(g)
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

// loadYAML reads the YAML file at path into c. A key of a setting that
// cmd does not take is an error, as its flag would be: a file shared by
// several commands would otherwise set, for one of them, what it silently
// ignores.
func (c *Config) loadYAML(path string, cmd Command, g given) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var raw map[string]yaml.Node
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	v := reflect.ValueOf(c).Elem()
	byName := map[string]setting{}
	for _, s := range settings() {
		byName[s.name] = s
	}
	for k, node := range raw {
		s, ok := byName[k]
		if !ok {
			return fmt.Errorf("config %s:%d: unknown key %q", path, node.Line, k)
		}
		if roles := s.roles(); !cmd.takes(roles) {
			return fmt.Errorf("config %s:%d: %q is a setting of %s, not of %s: remove it from the file %s reads",
				path, node.Line, k, commandsOf(roles), cmd.Name, cmd.Name)
		}
		g[k] = true
		if i := s.index; s.field.Type == listType {
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
		if err := s.set(c, node.Value); err != nil {
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

// register binds every field that cmd takes to a flag, with the current
// value as default.
func (c *Config) register(fs *flag.FlagSet, cmd Command) {
	v := reflect.ValueOf(c).Elem()
	for _, s := range settings() {
		if !cmd.takes(s.roles()) {
			continue
		}
		name, help := s.name, s.help
		p := v.Field(s.index).Addr().Interface()
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
		case *PerForge:
			fs.Var(perForgeFlag{m: p, kind: s.kind}, name, help)
		}
	}
}

// Markdown renders the settings as the table of docs/configuration.md
// (`gitfleet help config` prints it).
func Markdown() string {
	var b strings.Builder
	b.WriteString("| flag / YAML key | commands | type | default | what it sets |\n|---|---|---|---|---|\n")
	for _, f := range Fields() {
		d := "`" + f.Default + "`"
		if f.Default == "" {
			d = "(none)"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", f.Name, commandsOf(f.Roles), f.Type, d, f.Help)
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
