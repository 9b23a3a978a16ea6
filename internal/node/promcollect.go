package node

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// A node's Prometheus figures. Counters and histograms are updated where
// things happen (a check, a pull, a byte served); the gauges are read at a
// scrape from what the node keeps anyway (the scheduler's queues, the full
// node's counters of repositories by state, counters.go), so a scrape costs
// O(states + hosts + nodes), never O(repositories).

// maxHostLabels bounds the hosts named in gitfleet_upstream_errors_total;
// the rest are "other".
const maxHostLabels = 50

// nodeMetrics are the families a node updates as it works.
type nodeMetrics struct {
	checks         *prometheus.HistogramVec // role, kind, result
	pulls          *prometheus.HistogramVec // kind, result
	intervals      prometheus.Histogram
	upstreamErrors *prometheus.CounterVec // class, host
	hosts          *metrics.Hosts
	fetched        *prometheus.CounterVec // source
	served         *prometheus.CounterVec // to
}

// newNodeMetrics registers n's families on reg.
func newNodeMetrics(n *Node, reg metrics.Registry) *nodeMetrics {
	m := &nodeMetrics{hosts: metrics.NewHosts(maxHostLabels)}
	m.checks = metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gitfleet_check_duration_seconds",
		Help:    "Checks of repositories against their upstreams, by role of the node, kind (check: refs compared, nothing fetched; fetch; clone) and result (ok, failed).",
		Buckets: metrics.DurationBuckets(),
	}, []string{"role", "kind", "result"}))
	m.intervals = metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gitfleet_check_interval_seconds",
		Help:    "How long a repository this node checks had gone since its previous successful check when it was checked again (its staleness at the check).",
		Buckets: []float64{60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 48 * 3600, 7 * 24 * 3600},
	}))
	m.upstreamErrors = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_upstream_errors_total",
		Help: "Failed checks of upstreams, by error class and upstream host (the first 50 hosts by name, the rest as \"other\").",
	}, []string{"class", "host"}))
	m.fetched = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_fetched_bytes_total",
		Help: "Bytes received by git: from upstreams over http(s) through the egress proxy (source=upstream), from owners through their tunnels (source=owner, full node).",
	}, []string{"source"}))
	m.served = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_served_bytes_total",
		Help: "Bytes of git answers served: to the public (to=public, full node), to full nodes through tunnels (to=full-node, partial node).",
	}, []string{"to"}))
	if n.cfg.Mode == "full" {
		m.pulls = metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gitfleet_pull_duration_seconds",
			Help:    "Pulls of repositories from their owners through their tunnels, by kind (fetch, clone) and result (ok, failed).",
			Buckets: metrics.DurationBuckets(),
		}, []string{"kind", "result"}))
	}
	reg.MustRegister(&nodeCollector{n: n}, maintenanceCollector{n.maint})
	return m
}

// kindOf names what a check or a pull did: a clone (no mirror before it),
// a fetch (objects came), or a check (the refs were compared, nothing more).
func kindOf(hadMirror bool, res mirror.Result) string {
	switch {
	case !hadMirror || res.Cloned:
		return "clone"
	case res.Fetched:
		return "fetch"
	}
	return "check"
}

func resultOf(err error) string {
	if err != nil {
		return "failed"
	}
	return "ok"
}

// checked records one check of an upstream: its duration, and its error
// by class and host.
func (m *nodeMetrics) checked(role, kind, url, class string, took time.Duration, err error) {
	m.checks.WithLabelValues(role, kind, resultOf(err)).Observe(took.Seconds())
	if err != nil {
		m.upstreamErrors.WithLabelValues(class, m.hosts.Label(url)).Inc()
	}
}

// pulled records one pull from an owner.
func (m *nodeMetrics) pulled(kind string, took time.Duration, err error) {
	if m.pulls != nil {
		m.pulls.WithLabelValues(kind, resultOf(err)).Observe(took.Seconds())
	}
}

// rechecked records a repository's staleness at a check: the time since
// its previous successful one (nothing for a first check).
func (m *nodeMetrics) rechecked(prev, now time.Time) {
	if !prev.IsZero() && now.After(prev) {
		m.intervals.Observe(now.Sub(prev).Seconds())
	}
}

func (m *nodeMetrics) addFetched(source string) func(int) {
	c := m.fetched.WithLabelValues(source)
	return func(n int) { c.Add(float64(n)) }
}

func (m *nodeMetrics) addServed(to string) func(int) {
	c := m.served.WithLabelValues(to)
	return func(n int) { c.Add(float64(n)) }
}

// nodeCollector reads a node's gauges at a scrape: the scheduler's queues
// and counters (one Stats call, O(hosts)), its session and tunnels, and on
// a full node the families of fullCollector.
type nodeCollector struct{ n *Node }

var (
	descSchedQueue = prometheus.NewDesc("gitfleet_scheduler_queue",
		"Repositories waiting for a check, by lane (urgent: first clones and on-demand checks; background: due or not).", []string{"lane"}, nil)
	descSchedOverdue = prometheus.NewDesc("gitfleet_scheduler_overdue",
		"Background repositories past their due time, waiting for a fetcher, the budget or their host; past_max_interval: those not checked within --max-interval.", []string{"by"}, nil)
	descSchedRunning = prometheus.NewDesc("gitfleet_scheduler_running", "Checks running now.", nil, nil)
	descSchedRepos   = prometheus.NewDesc("gitfleet_scheduler_repos", "Repositories this node checks (its own).", nil, nil)
	descSchedChecks  = prometheus.NewDesc("gitfleet_scheduler_checks_total",
		"Checks finished, background and on demand (with --budget, the rate of those in the background is bounded).", nil, nil)
	descSchedFailures = prometheus.NewDesc("gitfleet_scheduler_failures_total", "Checks that failed, by the scheduler's class of failure.", []string{"class"}, nil)
	descSchedBacking  = prometheus.NewDesc("gitfleet_scheduler_hosts_backing_off", "Upstream hosts in backoff now (they throttled or refused).", nil, nil)
	descSchedGone     = prometheus.NewDesc("gitfleet_scheduler_gone", "Repositories parked after their upstream said \"not found\" again and again, or 451 (unavailable for legal reasons) once.", nil, nil)
	descBudget        = prometheus.NewDesc("gitfleet_scheduler_budget_checks_per_hour", "The node's --budget of background checks an hour (0: unlimited).", nil, nil)
	descBudgetShort   = prometheus.NewDesc("gitfleet_scheduler_budget_short",
		"1 while the budget cannot check every repository within --max-interval.", nil, nil)
	descMaxInterval = prometheus.NewDesc("gitfleet_scheduler_max_interval_seconds", "The node's --max-interval: the longest a repository may go unchecked.", nil, nil)
	descSession     = prometheus.NewDesc("gitfleet_node_session", "1 while the node is in session with the coordinator.", nil, nil)
	descNodeTunnels = prometheus.NewDesc("gitfleet_node_tunnels_open", "Tunnels this partial node holds open to full nodes.", nil, nil)
)

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSchedQueue, descSchedOverdue, descSchedRunning, descSchedRepos, descSchedChecks, descSchedFailures,
		descSchedBacking, descSchedGone, descBudget, descBudgetShort, descMaxInterval, descSession, descNodeTunnels} {
		ch <- d
	}
	if c.n.full != nil {
		describeFull(ch)
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	st := n.sched.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descSchedQueue, float64(st.Urgent), "urgent")
	gauge(descSchedQueue, float64(st.Background), "background")
	gauge(descSchedOverdue, float64(st.Overdue), "due")
	gauge(descSchedOverdue, float64(st.PastMaxInterval), "past_max_interval")
	gauge(descSchedRunning, float64(st.Running))
	gauge(descSchedRepos, float64(n.sched.Len()))
	ch <- prometheus.MustNewConstMetric(descSchedChecks, prometheus.CounterValue, float64(st.Checks))
	for class, v := range st.Failures {
		ch <- prometheus.MustNewConstMetric(descSchedFailures, prometheus.CounterValue, float64(v), class.String())
	}
	gauge(descSchedBacking, float64(st.HostsBackingOff))
	gauge(descSchedGone, float64(st.Gone))
	gauge(descBudget, n.cfg.Budget)
	gauge(descBudgetShort, boolValue(n.budgetShort.Load()))
	gauge(descMaxInterval, n.sched.MaxInterval().Seconds())
	n.mu.Lock()
	session, tunnels := n.sess != nil, len(n.tunnels)
	n.mu.Unlock()
	gauge(descSession, boolValue(session))
	gauge(descNodeTunnels, float64(tunnels))
	if n.full != nil {
		n.full.collect(ch)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// The full node's families, as its hand-written /metrics had them.
var (
	descRepos        = prometheus.NewDesc("gitfleet_repos", "Repositories the mirror holds, by state.", []string{"state"}, nil)
	descReposTotal   = prometheus.NewDesc("gitfleet_repos_total", "Repositories the mirror holds.", nil, nil)
	descReposCurrent = prometheus.NewDesc("gitfleet_repos_current",
		"Repositories the full node serves as it last saw their upstream (verified_at), with no newer change known.", nil, nil)
	descReposStale = prometheus.NewDesc("gitfleet_repos_stale",
		"Repositories whose verified_at is older than --alert-stale-after (never verified: not counted).", nil, nil)
	descStaleReports = prometheus.NewDesc("gitfleet_node_stale_reports_total",
		"Changes upstream that a node reported unchanged, found by the full node's own check.", []string{"node"}, nil)
	descTunnels    = prometheus.NewDesc("gitfleet_tunnels", "Partial nodes with a tunnel open to this full node.", nil, nil)
	descMismatches = prometheus.NewDesc("gitfleet_node_mismatches_total",
		"Pulls in which a node served a tip that the upstream never had.", []string{"node"}, nil)
	descDiskUsed  = prometheus.NewDesc("gitfleet_full_disk_used_bytes", "Space the full node's mirrors use, with the data it keeps for --retention and its pack cache (of --disk-quota, or of the file system).", nil, nil)
	descDiskTotal = prometheus.NewDesc("gitfleet_full_disk_total_bytes", "The full node's --disk-quota, or its file system's size.", nil, nil)
	descDiskFull  = prometheus.NewDesc("gitfleet_full_disk_full", "1 while the full node's disk is above its high water.", nil, nil)
	descDiskWait  = prometheus.NewDesc("gitfleet_full_disk_waiting", "Repositories the full node does not hold and waits for disk room to pull.", nil, nil)
	descNodes     = prometheus.NewDesc("gitfleet_nodes", "Nodes of the fleet, by state (as the coordinator lists them).", []string{"state"}, nil)
	descPurge     = prometheus.NewDesc("gitfleet_catalog_purge_pending",
		"1 while removals held by purge protection (too many within the purge window) wait for confirmation.", nil, nil)
	descProblems     = prometheus.NewDesc("gitfleet_catalog_problems", "Catalog entries skipped as bad.", nil, nil)
	descCatalogRepos = prometheus.NewDesc("gitfleet_catalog_repos", "Repositories in the applied catalog, with those added through the API.", nil, nil)
	descPullQueue    = prometheus.NewDesc("gitfleet_pull_queue", "Repositories waiting for a pull from their owner (pending), and being pulled (running).", []string{"state"}, nil)
)

func describeFull(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRepos, descReposTotal, descReposCurrent, descReposStale, descStaleReports, descTunnels, descMismatches, descDiskUsed,
		descDiskTotal, descDiskFull, descDiskWait, descNodes, descPurge, descProblems, descCatalogRepos, descPullQueue} {
		ch <- d
	}
}

// coordinatorWait bounds a scrape's questions to the coordinator (the
// fleet's nodes and catalog): without an answer, those families are left out.
const coordinatorWait = 2 * time.Second

// collect reads the full node's families: its counters (O(states)), its
// tunnels, forged tips by node, disk, pull queue, and the coordinator's
// view of nodes and catalog.
func (f *fullNode) collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	t := f.totals()
	for st, v := range t.byState {
		gauge(descRepos, float64(v), st)
	}
	gauge(descReposTotal, float64(t.total))
	gauge(descReposCurrent, float64(t.current))
	if f.tunnels != nil {
		gauge(descTunnels, float64(len(f.tunnels.Nodes())))
	}
	f.mu.Lock()
	for id, v := range f.mismatches.counts {
		ch <- prometheus.MustNewConstMetric(descMismatches, prometheus.CounterValue, float64(v), strconv.FormatUint(uint64(id), 10))
	}
	for id, v := range f.staleReports.counts {
		ch <- prometheus.MustNewConstMetric(descStaleReports, prometheus.CounterValue, float64(v), strconv.FormatUint(uint64(id), 10))
	}
	if f.alerts != nil {
		gauge(descReposStale, float64(f.stale.Count(f.n.clk.Now().Add(-f.alerts.cfg.StaleAfter).UnixMilli())))
	}
	pending, pulling := len(f.pending), len(f.pulling)
	f.mu.Unlock()
	gauge(descPullQueue, float64(pending), "pending")
	gauge(descPullQueue, float64(pulling), "running")
	used, total, full, waiting := f.diskFigures()
	gauge(descDiskUsed, float64(used))
	gauge(descDiskTotal, float64(total))
	gauge(descDiskFull, boolValue(full))
	gauge(descDiskWait, float64(waiting))

	ctx, cancel := context.WithTimeout(context.Background(), coordinatorWait)
	defer cancel()
	if nodes, err := f.fleet.Nodes(ctx); err == nil {
		byState := map[string]int{}
		for _, nd := range nodes {
			byState[nd.State]++
		}
		for st, v := range byState {
			gauge(descNodes, float64(v), st)
		}
	}
	if cat, err := f.fleet.Catalog(ctx); err == nil {
		gauge(descPurge, boolValue(cat.Pending != nil))
		gauge(descProblems, float64(cat.Problems))
		gauge(descCatalogRepos, float64(cat.Repos))
	}
}
