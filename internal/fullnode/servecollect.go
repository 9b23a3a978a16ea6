package fullnode

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/gitserve"
)

// serveCollector exports the full node's public git serving: its
// upload-pack slots and queue, and its pack cache (read at a scrape).
type serveCollector struct {
	git   *gitserve.Handler
	packs *gitserve.PackCache // nil: no pack cache
}

var (
	descServeRunning = prometheus.NewDesc("gitfleet_serve_upload_packs",
		"Upload-pack runs serving the public now.", nil, nil)
	descServeWaiting = prometheus.NewDesc("gitfleet_serve_queue",
		"Upload-pack requests waiting for a slot now.", nil, nil)
	descServeQueued = prometheus.NewDesc("gitfleet_serve_queued_total",
		"Upload-pack requests that waited for a slot, by outcome (served, timed-out: answered 503).", []string{"outcome"}, nil)
	descPackRequests = prometheus.NewDesc("gitfleet_serve_pack_requests_total",
		"Pack requests by how they were served: run (a pack-objects of their own), shared (joined an identical run in progress), cached (an identical pack kept on disk).", []string{"how"}, nil)
	descPackDropped = prometheus.NewDesc("gitfleet_serve_pack_cache_dropped_total",
		"Packs not kept or removed from the cache, by why: spilled (over the bound while written), evicted (for room), expired (past the TTL).", []string{"why"}, nil)
	descPackBytes = prometheus.NewDesc("gitfleet_serve_pack_cache_bytes",
		"Bytes the pack cache holds on disk now.", nil, nil)
)

func (c serveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descServeRunning, descServeWaiting, descServeQueued, descPackRequests, descPackDropped, descPackBytes} {
		ch <- d
	}
}

func (c serveCollector) Collect(ch chan<- prometheus.Metric) {
	q := c.git.Stats()
	ch <- prometheus.MustNewConstMetric(descServeRunning, prometheus.GaugeValue, float64(q.Running))
	ch <- prometheus.MustNewConstMetric(descServeWaiting, prometheus.GaugeValue, float64(q.Waiting))
	ch <- prometheus.MustNewConstMetric(descServeQueued, prometheus.CounterValue, float64(q.Queued-q.TimedOut), "served")
	ch <- prometheus.MustNewConstMetric(descServeQueued, prometheus.CounterValue, float64(q.TimedOut), "timed-out")
	if c.packs == nil {
		return
	}
	s := c.packs.Stats()
	for how, v := range map[string]int64{"run": s.Runs, "shared": s.Shared, "cached": s.Hits} {
		ch <- prometheus.MustNewConstMetric(descPackRequests, prometheus.CounterValue, float64(v), how)
	}
	for why, v := range map[string]int64{"spilled": s.Spilled, "evicted": s.Evicted, "expired": s.Expired} {
		ch <- prometheus.MustNewConstMetric(descPackDropped, prometheus.CounterValue, float64(v), why)
	}
	ch <- prometheus.MustNewConstMetric(descPackBytes, prometheus.GaugeValue, float64(s.Bytes))
}
