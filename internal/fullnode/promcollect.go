package fullnode

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/node"
)

// The full node's Prometheus figures, beside its runtime's (package node):
// the pulls' durations, updated as they end, and gauges read at a scrape
// from what the full node keeps anyway (the counters of repositories by
// state, classes.go), so that a scrape costs O(states + nodes), never
// O(repositories).

// registerMetrics registers the full node's families on reg.
func (f *Node) registerMetrics(reg metrics.Registry) {
	f.pulls = metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gitfleet_pull_duration_seconds",
		Help:    "Pulls of repositories from their owners through their tunnels, by kind (fetch, clone) and result (ok, failed).",
		Buckets: metrics.DurationBuckets(),
	}, []string{"kind", "result"}))
	f.peerCopies = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gitfleet_full_peer_copies_total",
		Help: "Copies of repositories from other full nodes (a join, a lost full node's share, a repair), by result: copied, or fell_back to the owner when no other full node served the verified state.",
	}, []string{"result"}))
	reg.MustRegister(fullCollector{f})
}

// pulled records one pull from an owner.
func (f *Node) pulled(kind string, took time.Duration, err error) {
	f.pulls.WithLabelValues(kind, node.ResultOf(err)).Observe(took.Seconds())
}

// fullCollector reads the full node's gauges at a scrape.
type fullCollector struct{ f *Node }

func (c fullCollector) Describe(ch chan<- *prometheus.Desc) { describeFull(ch) }

func (c fullCollector) Collect(ch chan<- prometheus.Metric) { c.f.collect(ch) }

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
	descReplBehind   = prometheus.NewDesc("gitfleet_tier_replicas_behind", "Replicas on the full tier whose refs have differed from the recorded state for longer than a pull takes (as the coordinator counts the full nodes' digests).", nil, nil)
	descUnderRepl    = prometheus.NewDesc("gitfleet_tier_under_replicated_repos", "Repositories with fewer healthy replicas than --full-replicas: copies confirmed on full nodes alive now, whose refs are not behind (as the coordinator counts them).", nil, nil)
	descPullQueue    = prometheus.NewDesc("gitfleet_pull_queue", "Repositories waiting for a pull from their owner (pending), and being pulled (running).", []string{"state"}, nil)
	descAlertEvals   = prometheus.NewDesc("gitfleet_alert_evaluations_total", "Evaluations of the alert rules (every --alert-interval).", nil, nil)
)

func describeFull(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRepos, descReposTotal, descReposCurrent, descReposStale, descStaleReports, descTunnels, descMismatches, descDiskUsed,
		descDiskTotal, descDiskFull, descDiskWait, descNodes, descPurge, descProblems, descCatalogRepos, descUnderRepl, descReplBehind, descPullQueue, descAlertEvals} {
		ch <- d
	}
}

// coordinatorWait bounds a scrape's questions to the coordinator (the
// fleet's nodes and catalog): without an answer, those families are left out.
const coordinatorWait = 2 * time.Second

// collect reads the full node's families: its counters (O(states)), its
// tunnels, forged tips by node, disk, pull queue, and the coordinator's
// view of nodes and catalog.
func (f *Node) collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	t := f.totals()
	for st, v := range t.byState {
		gauge(descRepos, float64(v), st.String())
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
		gauge(descReposStale, float64(f.stale.Count(f.clk.Now().Add(-f.alerts.cfg.StaleAfter).UnixMilli())))
		ch <- prometheus.MustNewConstMetric(descAlertEvals, prometheus.CounterValue, float64(f.alerts.evaluations.Load()))
	}
	pending, pulling := f.plan.Pending(), len(f.plan.Pulling())
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
		gauge(descUnderRepl, float64(cat.UnderReplicated))
		gauge(descReplBehind, float64(cat.ReplicasBehind))
	}
}
