package fullnode

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/gitserve"
)

// serveCollector exports the full node's public git serving: its
// upload-pack slots, its queues (the clients' and the runs'), and its pack
// cache (read at a scrape).
type serveCollector struct {
	git   *gitserve.Handler
	packs *gitserve.PackCache // nil: no pack cache
	conns *gitserve.ConnLimit
}

var (
	descServeRunning = prometheus.NewDesc("gitfleet_serve_upload_packs",
		"Upload-pack runs serving the public now.", nil, nil)
	descServeWaiting = prometheus.NewDesc("gitfleet_serve_queue",
		"Upload-pack requests waiting for a slot now.", nil, nil)
	descServeQueued = prometheus.NewDesc("gitfleet_serve_queued_total",
		"Upload-pack requests that waited for a slot, by outcome (served; timed-out: answered 503 past the wait; bumped: answered 503, their place given to a client with fewer waiting; left: the client went away).", []string{"outcome"}, nil)
	descServeRefused = prometheus.NewDesc("gitfleet_serve_queue_refused_total",
		"Upload-pack requests answered 503 at once: no slot, and the queue full or no wait left.", nil, nil)
	descClientWaiting = prometheus.NewDesc("gitfleet_serve_client_queue",
		"Git requests over their client address's share (--serve-max-per-client) waiting their turn now.", nil, nil)
	descClientQueued = prometheus.NewDesc("gitfleet_serve_client_queued_total",
		"Git requests that waited their client's turn, by outcome (served; timed-out: answered 429 past the wait; bumped: answered 429, their place given to a client with fewer waiting; left: the client went away).", []string{"outcome"}, nil)
	descClientRefused = prometheus.NewDesc("gitfleet_serve_client_refused_total",
		"Git requests over their client's share answered 429 at once: the queue full, or the client's waiting bodies at their bound.", nil, nil)
	descQueueWait = prometheus.NewDesc("gitfleet_serve_queue_wait_seconds",
		"How long git requests waited, by queue (client: their client's turn; run: an upload-pack slot).", []string{"queue"}, nil)
	descConns = prometheus.NewDesc("gitfleet_serve_conns",
		"Connections open to the public HTTP server now.", nil, nil)
	descConnsRefused = prometheus.NewDesc("gitfleet_serve_conns_refused_total",
		"Connections to the public HTTP server closed as they were accepted, unread: their client address (an IPv6 /64) held --serve-max-conns-per-client already.", nil, nil)
	descPackRequests = prometheus.NewDesc("gitfleet_serve_pack_requests_total",
		"Pack requests by how they were served: run (a pack-objects of their own), shared (joined an identical run in progress), cached (an identical pack kept on disk).", []string{"how"}, nil)
	descPackDropped = prometheus.NewDesc("gitfleet_serve_pack_cache_dropped_total",
		"Packs not kept or removed from the cache, by why: spilled (over the bound while written), evicted (for room), expired (past the TTL).", []string{"why"}, nil)
	descPackBytes = prometheus.NewDesc("gitfleet_serve_pack_cache_bytes",
		"Bytes the pack cache holds on disk now.", nil, nil)
)

func (c serveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descServeRunning, descServeWaiting, descServeQueued, descServeRefused,
		descClientWaiting, descClientQueued, descClientRefused, descQueueWait, descConns, descConnsRefused, descPackRequests, descPackDropped, descPackBytes} {
		ch <- d
	}
}

func (c serveCollector) Collect(ch chan<- prometheus.Metric) {
	q := c.git.Stats()
	ch <- prometheus.MustNewConstMetric(descServeRunning, prometheus.GaugeValue, float64(q.Running))
	ch <- prometheus.MustNewConstMetric(descServeWaiting, prometheus.GaugeValue, float64(q.Waiting))
	outcomes(ch, descServeQueued, q.QueueCounts)
	ch <- prometheus.MustNewConstMetric(descServeRefused, prometheus.CounterValue, float64(q.Refused))
	cq := q.Clients
	ch <- prometheus.MustNewConstMetric(descClientWaiting, prometheus.GaugeValue, float64(cq.Waiting))
	outcomes(ch, descClientQueued, cq)
	ch <- prometheus.MustNewConstMetric(descClientRefused, prometheus.CounterValue, float64(cq.Refused))
	ch <- waitHistogram(cq.Waits, "client")
	ch <- waitHistogram(q.Waits, "run")
	cs := c.conns.Stats()
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(cs.Open))
	ch <- prometheus.MustNewConstMetric(descConnsRefused, prometheus.CounterValue, float64(cs.Refused))
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

// outcomes exports how the waits in a queue ended.
func outcomes(ch chan<- prometheus.Metric, d *prometheus.Desc, q gitserve.QueueCounts) {
	for outcome, v := range map[string]int64{"served": q.Served, "timed-out": q.TimedOut, "bumped": q.Bumped, "left": q.Left} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), outcome)
	}
}

// waitHistogram exports the waits in one queue.
func waitHistogram(w gitserve.Waits, queue string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(w.Buckets))
	for i, n := range w.Buckets {
		buckets[gitserve.WaitBounds[i].Seconds()] = uint64(n)
	}
	return prometheus.MustNewConstHistogram(descQueueWait, uint64(w.Count), w.Sum.Seconds(), buckets, queue)
}
