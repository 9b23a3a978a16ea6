package coordinator

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/placement"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// The coordinator's Prometheus figures: counters updated where things
// happen (placement decisions, catalog refreshes, the store's writes), and
// gauges read at a scrape from the running coordinator under its lock, in
// O(nodes): nothing here walks the repositories.

// coordMetrics are one process's coordinator families. Serve and
// ServeElected make them once, and each coordinator of the process (one
// per term as leader) reports through them.
type coordMetrics struct {
	decisions   *prometheus.CounterVec // kind
	refreshes   *prometheus.CounterVec // result
	refusals    prometheus.Counter
	storeWrites *prometheus.HistogramVec
	feedAsks    *prometheus.CounterVec      // host, result
	feedRepos   *prometheus.CounterVec      // host
	feedChanges *prometheus.CounterVec      // host
	feedFailing *prometheus.GaugeVec        // host
	feedLimited *prometheus.GaugeVec        // host
	feedCover   *prometheus.GaugeVec        // host, coverage
	feedHour    *prometheus.GaugeVec        // host
	feedBudget  *prometheus.GaugeVec        // host, token
	running     atomic.Pointer[Coordinator] // the coordinator that leads here, if any
}

func newCoordMetrics(reg metrics.Registry) *coordMetrics {
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	m := &coordMetrics{storeWrites: metrics.StoreWrites(reg)}
	m.decisions = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_placement_decisions_total",
		Help: "Placement decisions sent to nodes, by kind: assign (a repository with no owner yet), move (an assignment to a new owner of a repository that had one), drop.",
	}, []string{"kind"}))
	m.refreshes = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_coordinator_catalog_refreshes_total",
		Help: "Fetches of the catalog repository and application of what changed, by result (ok, failed).",
	}, []string{"result"}))
	m.feedAsks = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_forge_feed_requests_total",
		Help: "Requests of the forges' change feeds, by forge host and result (ok, failed).",
	}, []string{"host", "result"}))
	m.feedRepos = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_forge_feed_repositories_asked_total",
		Help: "Repositories asked about by the forges' change feeds, by forge host.",
	}, []string{"host"}))
	m.feedChanges = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_forge_feed_changes_total",
		Help: "Pushes a forge's change feed saw that the owner had not checked since: each an urgent check and a hint to the full nodes.",
	}, []string{"host"}))
	m.feedFailing = metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gitfleet_forge_feed_failing",
		Help: "1 while a forge's change feed fails (its last request failed: its repositories are polled only), 0 while it answers.",
	}, []string{"host"}))
	m.feedLimited = metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gitfleet_forge_feed_limited",
		Help: "1 while a forge's change feed is feed-limited: a rate limit has held it back past --fed-max-age, so its repositories are no longer fed; 0 otherwise.",
	}, []string{"host"}))
	m.feedCover = metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gitfleet_forge_feed_repositories",
		Help: "Repositories of a forge host by coverage: fed (the feed answered for them within --fed-max-age), unfed (asked about, no answer that young), unaskable (the forge's API cannot name them: never asked, never fed).",
	}, []string{"host", "coverage"}))
	m.feedHour = metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gitfleet_forge_feed_requests_last_hour",
		Help: "Requests a forge's change feed made in the last hour.",
	}, []string{"host"}))
	m.feedBudget = metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gitfleet_forge_token_budget_remaining",
		Help: "What a feed's token has left of its rate limit, as the forge last said (-1: not said yet); token is \"token N of M\", never the token.",
	}, []string{"host", "token"}))
	m.refusals = metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gitfleet_placement_refusals_total",
		Help: "Assignments a node refused (its egress policy will not fetch the URL): each is remembered, and not offered to that node again until its next session.",
	}))
	reg.MustRegister(&coordCollector{m: m})
	return m
}

// feedAsked counts one request of a change feed about n repositories.
func (m *coordMetrics) feedAsked(host string, n int, err error) {
	result, failing := "ok", 0.0
	if err != nil {
		result, failing = "failed", 1
	}
	m.feedAsks.WithLabelValues(host, result).Inc()
	m.feedRepos.WithLabelValues(host).Add(float64(n))
	m.feedFailing.WithLabelValues(host).Set(failing)
}

// feedChanged counts the pushes an answer brought.
func (m *coordMetrics) feedChanged(host string, n int) {
	m.feedChanges.WithLabelValues(host).Add(float64(n))
}

// feedCovered records a feed's coverage, requests and budgets.
func (m *coordMetrics) feedCovered(h *fleetv1.FeedHost) {
	host := h.GetHost()
	limited := 0.0
	if h.GetState() == feedLimited.String() {
		limited = 1
	}
	m.feedLimited.WithLabelValues(host).Set(limited)
	m.feedCover.WithLabelValues(host, "fed").Set(float64(h.GetFed()))
	m.feedCover.WithLabelValues(host, "unfed").Set(float64(h.GetRepos() - h.GetFed()))
	m.feedCover.WithLabelValues(host, "unaskable").Set(float64(h.GetUnaskable()))
	m.feedHour.WithLabelValues(host).Set(float64(h.GetRequestsLastHour()))
	for _, t := range h.GetTokens() {
		m.feedBudget.WithLabelValues(host, t.GetName()).Set(float64(t.GetRemaining()))
	}
}

// decided counts one placement decision.
func (m *coordMetrics) decided(d placement.Decision) {
	kind := "drop"
	if d.Kind == placement.Assign {
		kind = "assign"
		if d.From != 0 {
			kind = "move"
		}
	}
	m.decisions.WithLabelValues(kind).Inc()
}

// refusal counts one node's refusal of an assignment.
func (m *coordMetrics) refusal() { m.refusals.Inc() }

// refreshed counts one catalog refresh.
func (m *coordMetrics) refreshed(err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.refreshes.WithLabelValues(result).Inc()
}

// leads makes c the coordinator the gauges read (nil: none leads here).
func (m *coordMetrics) leads(c *Coordinator) { m.running.Store(c) }

// stepsDown clears c, if it is still the one the gauges read.
func (m *coordMetrics) stepsDown(c *Coordinator) { m.running.CompareAndSwap(c, nil) }

type coordCollector struct{ m *coordMetrics }

var (
	descLeader = prometheus.NewDesc("gitfleet_coordinator_leader",
		"1 while this process runs the fleet's coordinator (alone, or as the elected leader); 0 while it waits as a follower.", nil, nil)
	descCoordNodes = prometheus.NewDesc("gitfleet_coordinator_nodes",
		"Nodes known to the coordinator, by state (alive, suspect, dead, ..., and revoked).", []string{"state"}, nil)
	descSessions = prometheus.NewDesc("gitfleet_coordinator_sessions", "Nodes in session with the coordinator now, by mode.", []string{"mode"}, nil)
	descPlacing  = prometheus.NewDesc("gitfleet_coordinator_placing",
		"1 once the warm-up is over and repositories are placed on nodes.", nil, nil)
	descCoordRepos = prometheus.NewDesc("gitfleet_coordinator_repos",
		"Repositories the coordinator places: the applied catalog with the API's additions and removals.", nil, nil)
	descCoordProblems = prometheus.NewDesc("gitfleet_coordinator_catalog_problems", "Catalog entries skipped as bad.", nil, nil)
	descCoordHeld     = prometheus.NewDesc("gitfleet_coordinator_catalog_held",
		"Removals held by purge protection, waiting for an operator's confirmation.", nil, nil)
	descInFlight = prometheus.NewDesc("gitfleet_placement_clones_in_flight",
		"Assignments sent to nodes whose clone is under way: neither confirmed nor failed (a failed clone frees its slot; its node retries it on its own).", nil, nil)
	descUnplaceable = prometheus.NewDesc("gitfleet_placement_unplaceable",
		"Repositories that every placement member refused (their egress policies): nobody mirrors them until a node that takes them is in session.", nil, nil)
	descNodeDiskUsed = prometheus.NewDesc("gitfleet_coordinator_node_disk_used_bytes",
		"Disk space each node in session reports its mirrors use.", []string{"node"}, nil)
	descNodeDiskTotal = prometheus.NewDesc("gitfleet_coordinator_node_disk_total_bytes",
		"Disk space each node in session reports it may use (its --disk-quota, or its file system's size).", []string{"node"}, nil)
)

func (c *coordCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descCoordNodes, descSessions, descPlacing, descCoordRepos, descCoordProblems,
		descCoordHeld, descInFlight, descUnplaceable, descNodeDiskUsed, descNodeDiskTotal} {
		ch <- d
	}
}

func (c *coordCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	co := c.m.running.Load()
	if co == nil {
		gauge(descLeader, 0)
		return
	}
	gauge(descLeader, 1)
	co.mu.Lock()
	defer co.mu.Unlock()
	byState := map[string]int{}
	for _, st := range co.table.Nodes() {
		byState[st.State.String()]++
	}
	for _, rec := range co.nodes {
		if rec.Revoked {
			byState["revoked"]++
		}
	}
	for st, v := range byState {
		gauge(descCoordNodes, float64(v), st)
	}
	sessions := map[string]int{"partial": 0, "full": 0}
	for id, s := range co.sessions {
		mode := "partial"
		if s.full {
			mode = "full"
		}
		sessions[mode]++
		if s.disk != nil {
			node := strconv.FormatUint(uint64(id), 10)
			gauge(descNodeDiskUsed, float64(s.disk.GetDiskUsedBytes()), node)
			gauge(descNodeDiskTotal, float64(s.disk.GetDiskTotalBytes()), node)
		}
	}
	for mode, v := range sessions {
		gauge(descSessions, float64(v), mode)
	}
	placing := 0.0
	if co.placing {
		placing = 1
	}
	gauge(descPlacing, placing)
	gauge(descCoordRepos, float64(co.engine.Len()))
	gauge(descCoordProblems, float64(co.problems))
	gauge(descCoordHeld, float64(len(co.held)))
	inFlight := 0
	for _, v := range co.engine.InFlight() {
		inFlight += v
	}
	gauge(descInFlight, float64(inFlight))
	gauge(descUnplaceable, float64(co.engine.UnplaceableCount()))
}
