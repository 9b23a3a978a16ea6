// Package api is the public HTTP surface of the full node: the JSON API
// under /api/v1/ (repositories, on-demand fetch tasks and their
// cancellation, the fetch log, nodes, the stream of ref updates, the
// OpenAPI description) and the webhook receivers under
// /hooks/ (GitHub, GitLab, Gitee). It owns request validation,
// authentication (the bearer token for writes and for error details, which
// anonymous readers see only as classes; the webhook secrets), the
// registry of fetch tasks, the pacing of webhook-triggered ones per
// repository and the rate of urgent checks per upstream host, the memory
// of webhook deliveries and one-time signatures against replays, the
// read deadline of request bodies, the event broker and outgoing
// webhooks; and the per-repository reads another full node relays to
// this one, with the rights the relaying node gave the caller (relay.go).
//
// It must not hold repository state nor do git or fleet work itself: every
// fact and every action goes through the Fleet the full node provides, a
// few small interfaces each defined beside the handlers that use it.
// Everything that arrives here is hostile until checked.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// ErrKeyCollision is returned (wrapped) when a URL's key is already held
// with another upstream URL.
var ErrKeyCollision = errors.New("key collision")

// ErrNotFound is returned (wrapped) for a repository or task that does not
// exist; the API answers 404.
var ErrNotFound = errors.New("not found")

// Fleet is what the full node provides to the API: one interface for each
// part, defined where it is used (one value may be all of them). Log and
// Hints may be nil: the server then keeps no fetch log (501) or hears no
// change hints; New refuses a Fleet without the others.
type Fleet struct {
	Repos   RepoReader    // repos.go
	Catalog CatalogEditor // repos.go
	Checks  CheckRunner   // repos.go, cancel.go
	Nodes   NodeAdmin     // nodes.go
	Log     LogReader     // fetchlog.go
	Hints   ChangeHinter  // hooks.go
	Feeds   FeedReader    // feeds.go; nil: no feed
	Archive ArchiveReader // archive.go; nil: 501
}

// ChangeHinter hears of upstream changes: a webhook for a mirrored
// repository calls ChangeHint with its receipt time, so that the full
// node can hold its owner to the change (see node.Node.ChangeHint).
type ChangeHinter interface {
	ChangeHint(ctx context.Context, key repokey.Key, pushedAt time.Time) error
}

// ErrNothingPending: no catalog change is waiting for confirmation.
var ErrNothingPending = errors.New("no catalog change is waiting for confirmation")

// CatalogStatus is the state of the catalog.
type CatalogStatus struct {
	Commit   string        `json:"commit"`
	Repos    int           `json:"repos"`
	Problems int           `json:"problems"`
	Pending  *PendingPurge `json:"pending_purge"`

	// ProblemLines are the first problems, "file:line: reason".
	ProblemLines []string `json:"problem_lines,omitempty"`

	// Error says why the catalog cannot be read (its repository missing,
	// out of reach, not a git repository), while it cannot, and ErrorAt
	// since when; Commit is then the last good one, if any. Anonymous
	// readers see the error's class only.
	Error      string          `json:"error,omitempty"`
	ErrorClass repostate.Class `json:"error_class,omitempty"`
	ErrorAt    *time.Time      `json:"error_at,omitempty"`

	// URL is where the catalog is fetched from (credentials redacted);
	// LastFetch when it was last fetched, successfully or not; NextFetch
	// the next fetch planned.
	URL       string    `json:"url,omitempty"`
	LastFetch time.Time `json:"last_fetch,omitzero"`
	NextFetch time.Time `json:"next_fetch,omitzero"`

	// UnderReplicated counts the repositories with fewer healthy replicas
	// than they should have (--full-replicas, or every full node when there
	// are no more): copies confirmed on full nodes alive now (not suspect,
	// not gone) whose refs are not behind; 0 while every full node holds
	// everything.
	UnderReplicated int `json:"under_replicated"`
	// ReplicasBehind counts the replicas whose refs have differed from
	// the recorded state for longer than a pull takes.
	ReplicasBehind int `json:"replicas_behind"`
}

// PendingPurge is the removals that purge protection holds until an
// operator confirms them (the rest of each catalog change was applied).
type PendingPurge struct {
	Commit  string   `json:"commit"`
	Removed int      `json:"removed"`
	Total   int      `json:"total"`
	Keys    []string `json:"keys,omitempty"` // the held repositories (the first 1,000)
}

// RepoFilter selects repositories. Zero values match everything.
type RepoFilter struct {
	State   *repostate.State
	Prefix  string
	Owner   uint32 // 0: any owner
	Network string // "": any network (or none)
	Offset  int
	Limit   int
}

// Repo is one repository as the API shows it.
type Repo struct {
	Key         string          `json:"key"`
	UpstreamURL string          `json:"upstream_url"`
	CloneURL    string          `json:"clone_url"`
	Owner       uint32          `json:"owner_node"`
	State       repostate.State `json:"state"`
	// StateSince is when a departed repository's state (deleted, legal,
	// disabled, gone), archived or renamed was first seen: the reason is
	// State's name, with LastError's class.
	StateSince *time.Time `json:"state_since,omitempty"`
	// RenamedTo is the upstream's new name, as a key, in the state
	// renamed: a key on another host is shown, never followed.
	RenamedTo string `json:"renamed_to,omitempty"`
	Served    bool   `json:"served"`
	Current   bool   `json:"current"`
	// VerifiedAt is when the full node last saw the upstream's refs equal
	// to what it serves (absent: never). Current and StalenessSeconds
	// derive from it.
	VerifiedAt *time.Time `json:"verified_at,omitempty"`
	LastCheck  *time.Time `json:"last_check,omitempty"`
	LastChange *time.Time `json:"last_change,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	// ErrorClass is LastError's class (package repostate), which anonymous
	// readers see as LastError too.
	ErrorClass       repostate.Class `json:"error_class,omitempty"`
	Digest           string          `json:"digest,omitempty"`
	StalenessSeconds float64         `json:"staleness_seconds"`
	// Network is the fork network the repository is in (absent:
	// standalone); NetworkParts, when above 1, says the network is too
	// large for one node and is split over that many.
	Network      string `json:"network,omitempty"`
	NetworkParts uint32 `json:"network_parts,omitempty"`
	// Replicas are the full nodes that are to hold the repository on the
	// full tier (--full-replicas of them), in placement order.
	Replicas []uint32 `json:"replicas,omitempty"`
	// ReplicaStates are Replicas with their states, in the same order.
	ReplicaStates []ReplicaState `json:"replica_states,omitempty"`
}

// ReplicaState is one replica of a repository on the full tier, as the
// coordinator knows it.
type ReplicaState struct {
	Node uint32 `json:"node"`
	// Confirmed: the full node said it holds the repository (a pull, its
	// inventory).
	Confirmed bool `json:"confirmed"`
	// Digest is the refs digest it last reported (absent: none, or no
	// refs), against the repository's Digest, the recorded one.
	Digest string `json:"digest,omitempty"`
	// Current: it holds the recorded state (the repository's digest).
	Current bool `json:"current"`
	// DiffersSince is since when it has not (absent: it has).
	DiffersSince *time.Time `json:"differs_since,omitempty"`
	// Behind: it has differed for longer than a pull takes
	// (repostate.ReplicaBehindAfter); a repair from a peer is due.
	Behind bool `json:"behind"`
}

// RepoDetail is a repository with its attributes, the refs the full node
// serves and its recent history.
type RepoDetail struct {
	Repo
	Attrs   map[string]string `json:"attrs,omitempty"`
	Refs    map[string]string `json:"refs,omitempty"`
	History []HistoryEntry    `json:"history,omitempty"` // bounded, newest first
	// Checks are the upstream ref listings made by the owners, Fetches
	// those that found new refs (the cheap check spares the rest).
	Checks  uint64 `json:"checks"`
	Fetches uint64 `json:"fetches"`
	// Head is the branch the served HEAD names: the upstream's default
	// branch, as the full node last verified it.
	Head string `json:"head,omitempty"`
}

// HistoryEntry is one check or fetch of a repository.
type HistoryEntry struct {
	At         time.Time `json:"at"`
	Kind       string    `json:"kind"` // "check", "fetch", "pull", "maintenance", ...
	Node       uint32    `json:"node,omitempty"`
	Changed    bool      `json:"changed"`
	DurationMs int64     `json:"duration_ms,omitempty"`
	Error      string    `json:"error,omitempty"`
	// From the fetch log (package fetchlog): ok, failed or cancelled; a
	// pull's source node; the refs changed (count, first names); the
	// error's public class.
	Result      string   `json:"result,omitempty"`
	From        uint32   `json:"from,omitempty"`
	RefsChanged int      `json:"refs_changed,omitempty"`
	Refs        []string `json:"refs,omitempty"`
	ErrorClass  string   `json:"error_class,omitempty"`
	// The refs whose old tips the work left behind (deleted, moved tags,
	// force-pushed), with their old and new IDs.
	Rewrites        []fetchlog.Rewrite `json:"rewrites,omitempty"`
	RewritesOmitted int                `json:"rewrites_omitted,omitempty"`
	// Head is HEAD's switch to another branch (the upstream's default
	// branch changed): ref HEAD, old and new the branches it named.
	Head *fetchlog.Move `json:"head,omitempty"`
	// RenamedTo is the upstream's new name, as a key: on a check that met
	// its git server's redirect, and on an entry of kind rename.
	RenamedTo string `json:"renamed_to,omitempty"`
}

// Node is one member of the fleet.
type Node struct {
	ID            uint32    `json:"id"`
	Name          string    `json:"name"`
	Mode          string    `json:"mode"`
	State         string    `json:"state"` // alive, suspect, gone, revoked
	RevokedReason string    `json:"revoked_reason,omitempty"`
	RevokedAt     time.Time `json:"revoked_at,omitzero"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	Repos         int       `json:"repos"`
	DiskUsed      uint64    `json:"disk_used"`
	DiskTotal     uint64    `json:"disk_total"`
	Flapping      bool      `json:"flapping"`
	Unhealthy     bool      `json:"unhealthy,omitempty"`
	// The flapping penalty: the placement weight and the grace in force.
	Capacity              float64      `json:"capacity"`
	EffectiveWeight       float64      `json:"effective_weight"`
	EffectiveGraceSeconds float64      `json:"effective_grace_seconds"`
	History               []Transition `json:"history,omitempty"`
	// Mismatches counts the pulls in which the node served a tip that the
	// upstream never had (as seen by the full node that answers).
	Mismatches uint64 `json:"mismatches"`
	// StaleReports counts the changes, told of by a webhook or a forge
	// feed or found by a spot check, after which the node reported the
	// repository unchanged while the full node found it changed upstream
	// (as seen by the full node that answers).
	StaleReports uint64 `json:"stale_reports"`
	// A full node's share of the full tier: the repositories it is to
	// hold (TierRepos) and those it confirmed it holds; every repository,
	// and no confirmations, while every full node holds everything.
	TierRepos     int `json:"tier_repos,omitempty"`
	TierHeldRepos int `json:"tier_held_repos,omitempty"`
	// The same in bytes, as the tier weighs them: the sizes full nodes
	// reported (an owner's until a full node pulled the repository), each
	// repository at least 64 KiB.
	TierBytes     uint64 `json:"tier_bytes,omitempty"`
	TierHeldBytes uint64 `json:"tier_held_bytes,omitempty"`
}

// Transition is one change of a node's state.
type Transition struct {
	From string    `json:"from"`
	To   string    `json:"to"`
	At   time.Time `json:"at"`
}

// Config configures the API.
type Config struct {
	// Token is the bearer token that write requests must carry. Empty
	// refuses every write.
	Token string
	// WebhookSecrets maps a forge kind that takes webhooks (forge's
	// table) to the secret of its webhooks; the "" entry is the default for
	// every kind. A kind with no secret refuses its webhooks.
	WebhookSecrets map[string]string
	// AutoAdd adds the repository of a webhook that names an unknown one
	// (never from Gitee, whose signature does not cover the body): the
	// repository of that full name on the one of Forges of the endpoint's
	// kind that the payload's URLs name, never a URL of the payload.
	AutoAdd bool
	// Forges are the forges whose repositories AutoAdd may add (package
	// forge's well-known hosts, and the operator's --forge).
	Forges []forge.Forge
	// PublicURL is the mirror's base URL for clone URLs; empty: from the
	// request's Host.
	PublicURL string
	// OutgoingHooks are URLs that get every batch of ref-update events.
	OutgoingHooks []string
	// OutgoingSecret signs outgoing webhooks (X-Gitfleet-Signature-256).
	OutgoingSecret string
	// AllowPrivate accepts upstream URLs on loopback and private networks.
	AllowPrivate bool
	// Egress checks upstream URLs and dials outgoing webhooks (nil: the
	// default policy that AllowPrivate selects, the system's resolver).
	Egress *egress.Dialer
	// Fold says which hosts' paths are case-insensitive in keys.
	Fold repokey.Folding
	// MaxBody bounds request bodies in bytes. Zero: 1 MiB for the API,
	// 25 MiB (GitHub's maximum) for webhooks.
	MaxBody int64
	// CheckSpacing paces webhook-triggered checks of one repository: a
	// burst of a few, then one per CheckSpacing (0: no pacing).
	CheckSpacing time.Duration
	// HostRate bounds the urgent checks of one upstream host, from
	// webhooks and the API's on-demand fetches together, to HostRate a
	// minute after a burst of HostBurst (0: no bound); over it, 429 with
	// Retry-After.
	HostRate, HostBurst int
	// ReadTimeout bounds the time a client may take to send a request
	// body, from the end of its headers (0: 10s); over it, 408.
	ReadTimeout time.Duration
}

const (
	defaultMaxAPIBody  = 1 << 20
	defaultMaxHookBody = 25 << 20
	defaultReadTimeout = 10 * time.Second
)

// Server serves /api/v1/ and /hooks/. It is an http.Handler; Close stops
// its background work (outgoing webhooks, starting queued fetches, event
// streams).
type Server struct {
	cfg    Config
	fleet  Fleet
	tasks  *Tasks
	events *Broker
	log    *slog.Logger
	clk    clock.Clock
	mux    *http.ServeMux
	// delivered are the webhook deliveries acted on, for replays.
	delivered *deliveries
	pacer     *pacer
	hostRate  *hostRate

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed against wg.Add after Close
	closed bool
	wg     sync.WaitGroup
}

// New returns a Server on fleet. It starts the outgoing webhook senders,
// if any. It panics if fleet lacks a part that is not optional: a server
// that would fail at its first request instead.
func New(cfg Config, fleet Fleet, tasks *Tasks, events *Broker, log *slog.Logger, clk clock.Clock) *Server {
	if fleet.Repos == nil || fleet.Catalog == nil || fleet.Checks == nil || fleet.Nodes == nil {
		panic(fmt.Sprintf("api: New: the fleet lacks a part: %+v", fleet))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, fleet: fleet, tasks: tasks, events: events, log: log, clk: clk,
		mux: http.NewServeMux(), ctx: ctx, cancel: cancel,
		delivered: newDeliveries(clk, deliveryTTL, maxDeliveries), pacer: newPacer(cfg.CheckSpacing, hookBurst),
		hostRate: newHostRate(cfg.HostRate, cfg.HostBurst)}
	s.routes()
	s.startOutgoing()
	return s
}

// Close stops background work and waits for it. Open event streams end.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// background runs f in a goroutine that Close cancels and waits for.
func (s *Server) background(f func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
}

// ServeHTTP implements http.Handler. A request's body must arrive within
// the read timeout: the deadline bounds what a handler reads (readBody
// answers 408 past it) and what the server reads of a body that a refusal
// left unread before it sends the answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		rt := s.cfg.ReadTimeout
		if rt <= 0 {
			rt = defaultReadTimeout
		}
		// A socket deadline is wall-clock time, whatever clock the logic
		// runs on.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(rt))
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /api/v1/repos", s.listRepos)
	m.HandleFunc("POST /api/v1/repos", s.addRepo)
	m.HandleFunc("/api/v1/repos", methodNotAllowed("GET, POST"))
	m.HandleFunc("GET /api/v1/repos/{key...}", s.getRepo)
	m.HandleFunc("DELETE /api/v1/repos/{key...}", s.removeRepo)
	m.HandleFunc("PATCH /api/v1/repos/{key...}", s.updateRepo)
	m.HandleFunc("POST /api/v1/repos/{key...}", s.fetch) // only .../fetch
	m.HandleFunc("/api/v1/repos/{key...}", methodNotAllowed("GET, PATCH, DELETE"))
	m.HandleFunc("GET /api/v1/log", s.fetchLog)
	m.HandleFunc("/api/v1/log", methodNotAllowed("GET"))
	m.HandleFunc("GET /api/v1/tasks/{id}", s.getTask)
	m.HandleFunc("/api/v1/tasks/{id}", methodNotAllowed("GET"))
	m.HandleFunc("GET /api/v1/tasks", s.listTasks)
	m.HandleFunc("/api/v1/tasks", methodNotAllowed("GET"))
	m.HandleFunc("POST /api/v1/tasks/{id}/cancel", s.cancelTask)
	m.HandleFunc("/api/v1/tasks/{id}/cancel", methodNotAllowed("POST"))
	m.HandleFunc("GET /api/v1/nodes", s.nodes)
	m.HandleFunc("/api/v1/nodes", methodNotAllowed("GET"))
	m.HandleFunc("POST /api/v1/nodes/{id}/revoke", s.revokeNode)
	m.HandleFunc("/api/v1/nodes/{id}/revoke", methodNotAllowed("POST"))
	m.HandleFunc("GET /api/v1/events", s.streamEvents)
	m.HandleFunc("/api/v1/events", methodNotAllowed("GET"))
	m.HandleFunc("GET /api/v1/catalog", s.catalog)
	m.HandleFunc("/api/v1/catalog", methodNotAllowed("GET"))
	m.HandleFunc("POST /api/v1/catalog/confirm-purge", s.confirmPurge)
	m.HandleFunc("/api/v1/catalog/confirm-purge", methodNotAllowed("POST"))
	m.HandleFunc("GET /api/v1/feeds", s.feeds)
	m.HandleFunc("/api/v1/feeds", methodNotAllowed("GET"))
	m.HandleFunc("GET /api/v1/openapi.json", serveOpenAPI)
	m.HandleFunc("/api/v1/openapi.json", methodNotAllowed("GET"))
	for _, h := range hosts {
		m.HandleFunc("POST /hooks/"+h.name, s.hookHandler(h))
		m.HandleFunc("/hooks/"+h.name, methodNotAllowed("POST"))
	}
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	m.HandleFunc("/api/", notFound)
	m.HandleFunc("/hooks/", notFound)
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed here (allowed: %s)", r.Method, allow))
	}
}

// writeJSON writes v as indented JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client has gone if this fails
}

// apiError is the body of every error answer.
type apiError struct {
	Error string `json:"error"`
	// Code names the error for programs, where one is defined
	// (key_collision, blocked_destination).
	Code string `json:"code,omitempty"`
}

// retryAfter is the Retry-After, in seconds, of an answer 503.
const retryAfter = "5"

func writeError(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusServiceUnavailable {
		// The coordinator is out of reach: a restart or an election, over
		// in seconds. Say when to come back (RFC 9110, 10.2.3).
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, apiError{Error: msg})
}

// writeCodedError is writeError with a code for programs.
func writeCodedError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: msg, Code: code})
}

// authorized checks the bearer token of a write request, answering 401 or
// 403 itself when it fails.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Token == "" {
		writeError(w, http.StatusForbidden, "writes are disabled: the server has no API token configured")
		return false
	}
	scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	ok := strings.EqualFold(scheme, "Bearer") // schemes are case-insensitive (RFC 9110)
	if !ok || !forge.EqualSecret(strings.TrimSpace(got), s.cfg.Token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gitfleet"`)
		if !ok {
			writeError(w, http.StatusUnauthorized, "this request needs an API token: Authorization: Bearer <token>")
		} else {
			writeError(w, http.StatusUnauthorized, "wrong API token")
		}
		return false
	}
	return true
}

// readBody reads the whole body up to max bytes within the read deadline
// that ServeHTTP set, answering 413, 408 or 400 itself when it fails.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		// Do not read the rest of a bad body before answering.
		w.Header().Set("Connection", "close")
		var tooBig *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", max))
		case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			writeError(w, http.StatusRequestTimeout, "the request body was not sent in time")
		default:
			writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		}
		return nil, false
	}
	// Read whole: what the handler does next (a long wait, a stream) is
	// not bounded by the body's deadline.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return body, true
}

func (s *Server) maxBody(def int64) int64 {
	if s.cfg.MaxBody > 0 {
		return s.cfg.MaxBody
	}
	return def
}
