package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Background maintenance of the mirrors on disk (every role): the mirrors
// that were just written to (a fetch, a pull, a repair) or read by the
// integrity scan are probed (mirror.Store.Probe: a look at their files),
// and those in need (many loose objects or packs, no bitmap or commit
// graph, a full run due) are maintained (mirror.Store.Maintain), the most
// in need first, by MaintenanceConcurrency lanes, each busy at most
// MaintenanceDuty of the time. A run holds the mirror's lock, so a fetch of
// that mirror waits for it; serving goes on beside it.

// maintProbeBatch is how many candidates a lane probes before it picks
// one: a probe is a few directory listings.
const maintProbeBatch = 256

// maintainer is a node's maintenance state.
type maintainer struct {
	lanes        int
	duty         float64
	fullInterval time.Duration

	mu   sync.Mutex
	plan *maintPlan
	wake chan struct{}

	// Counters, for /metrics.
	runs, fullRuns, failures atomic.Uint64
	nanos                    atomic.Int64
}

func newMaintainer(lanes int, duty float64, fullInterval time.Duration) *maintainer {
	if duty <= 0 || duty > 1 {
		duty = 0.1
	}
	return &maintainer{lanes: max(lanes, 0), duty: duty, fullInterval: fullInterval,
		plan: newMaintPlan(), wake: make(chan struct{}, max(lanes, 1))}
}

// note makes key a candidate for maintenance (its mirror was just written
// to or read whole).
func (m *maintainer) note(key repokey.Key) {
	if m.lanes == 0 {
		return
	}
	m.mu.Lock()
	m.plan.note(key)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// maintainLoop is one lane: it probes candidates, maintains the one most in
// need, and keeps to the duty bound, until ctx ends.
func (n *Node) maintainLoop(ctx context.Context) {
	m := n.maint
	var lastStart time.Time
	var lastDur time.Duration
	for ctx.Err() == nil {
		if !n.waitActive(ctx) { // background work: in the volunteer's hours
			return
		}
		if w := dutyWait(lastStart, lastDur, m.duty, n.clk.Now()); w > 0 {
			select {
			case <-ctx.Done():
				return
			case <-n.clk.After(w):
			}
			continue
		}
		m.mu.Lock()
		keys := m.plan.toProbe(maintProbeBatch)
		m.mu.Unlock()
		for _, k := range keys {
			sh, err := n.probe(k)
			m.mu.Lock()
			if err != nil {
				m.plan.forget(k) // gone (removed, moved aside): nothing to keep
			} else {
				m.plan.probed(k, mirror.NeedOf(sh, n.clk.Now(), m.fullInterval))
			}
			m.mu.Unlock()
		}
		m.mu.Lock()
		key, need, ok := m.plan.take()
		more := m.plan.candidates() > 0
		m.mu.Unlock()
		if !ok {
			if more {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-m.wake:
			}
			continue
		}
		lastStart = n.clk.Now()
		n.maintainOne(ctx, key, need)
		lastDur = n.clk.Now().Sub(lastStart)
		m.mu.Lock()
		m.plan.done(key)
		m.mu.Unlock()
	}
}

// probe looks at the shape of key's mirror (mirror.Store.Probe).
func (n *Node) probe(key repokey.Key) (mirror.Shape, error) { return n.mirror.Probe(key) }

// maintainOne runs maintenance on key's mirror and records it.
func (n *Node) maintainOne(ctx context.Context, key repokey.Key, need mirror.Need) {
	m := n.maint
	start := n.clk.Now()
	rep, err := n.mirror.Maintain(ctx, key, m.fullInterval)
	d := n.clk.Now().Sub(start)
	if ctx.Err() != nil {
		return // shutting down: the run was cut short, not failed
	}
	if err == nil && !rep.Ran {
		return // gone meanwhile, or empty
	}
	m.runs.Add(1)
	m.nanos.Add(int64(d))
	if rep.Full {
		m.fullRuns.Add(1)
	}
	entry := fetchlog.Entry{Key: key.String(), At: start, Kind: "maintenance", Node: n.id, Result: fetchlog.ResultOK, DurationMs: d.Milliseconds()}
	if err != nil {
		m.failures.Add(1)
		entry.Result, entry.Error, entry.ErrorClass = fetchlog.ResultFailed, err.Error(), PublicClass(err).String()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			n.log.Debug("mirror gone during maintenance", "key", key, "err", err)
		case gitcmd.ClassOf(err) == gitcmd.ClassBadObjects:
			n.log.Warn("maintenance of a mirror failed on its objects", "key", key, "full", rep.Full, "err", err)
			n.checkIntegritySoon(key, "maintenance") // checked, and repaired if broken
		default:
			n.log.Warn("maintenance of a mirror failed", "key", key, "full", rep.Full, "err", err)
		}
	} else {
		n.log.Info("mirror maintained", "key", key, "full", rep.Full, "need", fmt.Sprintf("%.2f", need.Score),
			"packs_before", rep.Before.Packs, "packs", rep.After.Packs, "loose_before", rep.Before.Loose,
			"loose", rep.After.Loose, "ms", d.Milliseconds())
	}
	n.flog.Append(entry) // every role logs its own maintenance
}

// maintenanceCollector exports the maintenance counters (read at a scrape).
type maintenanceCollector struct{ m *maintainer }

var (
	descMaintRuns = prometheus.NewDesc("gitfleet_maintenance_runs_total",
		"Maintenance runs of mirrors (repack, bitmap, commit graph), by kind (full, incremental).", []string{"kind"}, nil)
	descMaintSeconds = prometheus.NewDesc("gitfleet_maintenance_seconds_total",
		"Time spent in maintenance runs.", nil, nil)
	descMaintFailures = prometheus.NewDesc("gitfleet_maintenance_failures_total",
		"Maintenance runs that failed.", nil, nil)
	descMaintCandidates = prometheus.NewDesc("gitfleet_maintenance_candidates",
		"Mirrors waiting to be probed or maintained.", nil, nil)
)

func (c maintenanceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMaintRuns, descMaintSeconds, descMaintFailures, descMaintCandidates} {
		ch <- d
	}
}

func (c maintenanceCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	waiting := m.plan.candidates()
	m.mu.Unlock()
	full := m.fullRuns.Load()
	ch <- prometheus.MustNewConstMetric(descMaintRuns, prometheus.CounterValue, float64(full), "full")
	ch <- prometheus.MustNewConstMetric(descMaintRuns, prometheus.CounterValue, float64(m.runs.Load()-full), "incremental")
	ch <- prometheus.MustNewConstMetric(descMaintSeconds, prometheus.CounterValue, time.Duration(m.nanos.Load()).Seconds())
	ch <- prometheus.MustNewConstMetric(descMaintFailures, prometheus.CounterValue, float64(m.failures.Load()))
	ch <- prometheus.MustNewConstMetric(descMaintCandidates, prometheus.GaugeValue, float64(waiting))
}
