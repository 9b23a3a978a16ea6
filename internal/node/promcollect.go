package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// A node's Prometheus figures. Counters and histograms are updated where
// things happen (a check, a byte served); the gauges are read at a scrape
// from what the node keeps anyway (the scheduler's queues), so a scrape
// costs O(hosts), never O(repositories). A full node registers its own
// families beside these (package fullnode).

// maxHostLabels bounds the hosts named in gitfleet_upstream_errors_total;
// the rest are "other".
const maxHostLabels = 50

// nodeMetrics are the families a node updates as it works.
type nodeMetrics struct {
	checks         *prometheus.HistogramVec // role, kind, result
	intervals      prometheus.Histogram
	upstreamErrors *prometheus.CounterVec // class, host
	hosts          *metrics.Hosts
	fetched        *prometheus.CounterVec // source
	served         *prometheus.CounterVec // to
}

// newNodeMetrics registers n's families on reg.
func newNodeMetrics(reg metrics.Registry) *nodeMetrics {
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
	return m
}

// KindOf names what a check or a pull did: a clone (no mirror before it),
// a fetch (objects came), or a check (the refs were compared, nothing more).
func KindOf(hadMirror bool, res mirror.Result) string {
	switch {
	case !hadMirror || res.Cloned:
		return "clone"
	case res.Fetched:
		return "fetch"
	}
	return "check"
}

// ResultOf names the result of a check or a pull in the metrics.
func ResultOf(err error) string {
	if err != nil {
		return "failed"
	}
	return "ok"
}

// checked records one check of an upstream: its duration, and its error
// by class and host.
func (m *nodeMetrics) checked(role, kind, url, class string, took time.Duration, err error) {
	m.checks.WithLabelValues(role, kind, ResultOf(err)).Observe(took.Seconds())
	if err != nil {
		m.upstreamErrors.WithLabelValues(class, m.hosts.Label(url)).Inc()
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
// and counters (one Stats call, O(hosts)), its session and tunnels.
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
}

// boolValue is a gauge's value of b.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
