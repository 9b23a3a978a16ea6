package fullnode

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gitfleet/gitfleet/internal/alert"
	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// The full node evaluates the alert rules (package alert) on a timer,
// over a snapshot of figures it keeps anyway: the repositories' counters
// (classes.go, package repoview) and the stale counter, the nodes and the
// catalog from the coordinator, the forged tips it counted, its session.
// An evaluation costs O(states + nodes), never O(repositories). Firing
// alerts are kept in the node's store, so that a restart neither fires
// them again nor forgets to resolve them.

// AlertConfig configures a full node's alerts.
type AlertConfig struct {
	// URLs are the receivers (--alert); with none, alerts are only logged.
	URLs []string
	// Interval is how often the rules are evaluated (default 15 s).
	Interval time.Duration
	// StaleAfter is the age of a verified_at (when the full node last saw
	// the upstream's refs equal to what it serves) that makes a repository
	// stale (default: MaxInterval).
	StaleAfter time.Duration
	Thresholds alert.Thresholds
}

const bucketAlerts = "alerts"

// alerting is a full node's evaluator and notifier.
type alerting struct {
	cfg      AlertConfig
	eval     *alert.Evaluator
	notifier *alert.Notifier
	watch    alert.MismatchWatch
	stale    alert.MismatchWatch // stale reports, as watch is forged tips
	// evaluations of the rules so far, for the metrics (a test waits for
	// them where it proves that nothing fired)
	evaluations atomic.Uint64
}

func newAlerting(fc Config, dialer *egress.Dialer, clk clock.Clock, log *slog.Logger) (*alerting, error) {
	cfg := fc.Alerts
	if cfg.Interval <= 0 {
		cfg.Interval = 15 * time.Second
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = fc.MaxInterval
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 24 * time.Hour
	}
	if cfg.Thresholds == (alert.Thresholds{}) {
		cfg.Thresholds = alert.DefaultThresholds()
	}
	cfg.Thresholds.DiskHighWater = fc.DiskHighWater
	notifier, err := alert.NewNotifier(cfg.URLs, alert.Options{Dialer: dialer, Clock: clk, Log: log})
	if err != nil {
		return nil, fmt.Errorf("full node: --alert: %w", err)
	}
	return &alerting{cfg: cfg, eval: alert.NewEvaluator(alert.Rules(cfg.Thresholds)), notifier: notifier}, nil
}

// alertLoop evaluates the rules every interval until ctx ends.
func (f *Node) alertLoop(ctx context.Context) {
	a := f.alerts
	a.notifier.SetConsole(f.publicURL() + "/-/")
	for _, r := range a.notifier.Receivers() {
		f.log.Info("alerts: receiver", "receiver", r)
	}
	for _, err := range a.notifier.CheckPolicy() {
		f.log.Warn("alerts: the egress policy refuses a receiver; its alerts will be dropped (--egress-allow, --egress-ports)", "err", err)
	}
	f.restoreAlerts(ctx)
	done := make(chan struct{})
	go func() { a.notifier.Run(ctx); close(done) }()
	defer func() { <-done }()
	tick := f.clk.NewTicker(a.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		a.notifier.Notify(f.evaluateAlerts(ctx)...)
	}
}

// evaluateAlerts evaluates the rules now, logs and keeps what fired or
// resolved, and returns it.
func (f *Node) evaluateAlerts(ctx context.Context) []alert.Event {
	now := f.clk.Now()
	events := f.alerts.eval.Evaluate(f.alertSnapshot(ctx, now), now)
	for _, e := range events {
		f.log.Warn("alert "+string(e.Status), "alert", e.Key, "summary", e.Summary, "figure", e.Figure, "threshold", e.Threshold, "since", e.Since)
		f.keepAlert(ctx, e)
	}
	f.alerts.evaluations.Add(1)
	return events
}

// restoreAlerts reads the alerts that were firing before a restart: they
// do not fire again, and resolve when their condition is seen to end. The
// forged tips' counts start again from zero with the process, so a node's
// mismatch alert resolves an hour after the restart unless it serves more.
func (f *Node) restoreAlerts(ctx context.Context) {
	a := f.alerts
	var restored []alert.Alert
	err := f.db.Scan(ctx, bucketAlerts, "", func(_ string, v []byte) error {
		var al alert.Alert
		if err := json.Unmarshal(v, &al); err != nil {
			return err
		}
		restored = append(restored, al)
		return nil
	})
	if err != nil {
		f.log.Warn("alerts: read the firing alerts kept before the restart", "err", err)
	}
	for _, al := range a.eval.Restore(restored) {
		f.keepAlert(ctx, alert.Event{Alert: al, Status: alert.Resolved}) // a rule of another version: forget it
	}
	for _, al := range restored {
		var id uint32
		if _, err := fmt.Sscanf(al.Key, alert.RuleMismatch+"/%d", &id); err == nil && al.Rule == alert.RuleMismatch {
			a.watch.Seen(id, f.clk.Now())
		}
		if _, err := fmt.Sscanf(al.Key, alert.RuleStaleReport+"/%d", &id); err == nil && al.Rule == alert.RuleStaleReport {
			a.stale.Seen(id, f.clk.Now())
		}
	}
	if len(restored) > 0 {
		f.log.Info("alerts: firing before the restart, not fired again", "alerts", len(restored))
	}
}

// keepAlert records a firing alert in the store, and forgets a resolved one.
func (f *Node) keepAlert(ctx context.Context, e alert.Event) {
	var err error
	if e.Status == alert.Resolved {
		err = f.db.Delete(ctx, bucketAlerts, e.Key)
	} else {
		b, _ := json.Marshal(e.Alert)
		err = f.db.Put(ctx, bucketAlerts, e.Key, b)
	}
	if err != nil {
		f.log.Warn("alerts: store", "alert", e.Key, "err", err)
	}
}

// alertSnapshot reads the figures the rules look at. The coordinator's
// (nodes, catalog) are asked for only while the session is open; the
// repositories' counters count once the coordinator has sent the view.
func (f *Node) alertSnapshot(ctx context.Context, now time.Time) *alert.Snapshot {
	a := f.alerts
	s := &alert.Snapshot{}
	s.Session.Connected, s.Session.NoLeader = f.n.Session()
	self := f.n.ID()

	f.mu.Lock()
	if s.Session.Connected && f.view.Len() > 0 {
		s.Repos = &alert.Repos{Total: f.view.Len(), Failing: f.counts.InState(repostate.Failing),
			Stale: f.stale.Count(now.Add(-a.cfg.StaleAfter).UnixMilli()), StaleAfter: a.cfg.StaleAfter}
	}
	s.FeedsFailing = slices.Clone(f.feedsFailing)
	mismatches := maps.Clone(f.mismatches.counts)
	staleReports := maps.Clone(f.staleReports.counts)
	ownUsed, ownTotal := f.mark.used, f.mark.total
	f.mu.Unlock()
	s.Mismatches = a.watch.Observe(mismatches, now)
	s.StaleReports = a.stale.Observe(staleReports, now)

	if !s.Session.Connected {
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if nodes, err := f.backend.Nodes(ctx); err == nil {
		s.NodesKnown = true
		for _, nd := range nodes {
			an := alert.Node{ID: nd.ID, Name: nd.Name, State: nd.State, LastHeartbeat: nd.LastHeartbeat,
				Grace: time.Duration(nd.EffectiveGraceSeconds * float64(time.Second)), DiskUsed: nd.DiskUsed, DiskTotal: nd.DiskTotal}
			if nd.ID == self && an.DiskTotal == 0 {
				an.DiskUsed, an.DiskTotal = ownUsed, ownTotal // the full node measures its own disk
			}
			s.Nodes = append(s.Nodes, an)
		}
	} else if !strings.Contains(err.Error(), "not connected") {
		f.log.Debug("alerts: list the nodes", "err", err)
	}
	if cat, err := f.backend.Catalog(ctx); err == nil {
		s.Catalog = &alert.Catalog{Error: api.PublicError(cat.Error, cat.ErrorClass), UnderReplicated: cat.UnderReplicated}
		if cat.ErrorAt != nil {
			s.Catalog.ErrorAt = *cat.ErrorAt
		}
		if p := cat.Pending; p != nil {
			s.Catalog.HeldCommit, s.Catalog.HeldRemoved, s.Catalog.HeldAll = p.Commit, p.Removed, p.Total
		}
	}
	return s
}
