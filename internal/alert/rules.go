package alert

import (
	"fmt"
	"time"
)

// Thresholds are the limits of the rules. Start from DefaultThresholds.
type Thresholds struct {
	// FailingShare: alert when more than this share of all repositories
	// are failing.
	FailingShare float64
	// StaleShare: alert when more than this share of all repositories
	// were not verified against their upstreams by the full node (their
	// verified_at) within their StaleAfter (--max-interval).
	StaleShare float64
	// DiskHighWater: alert when a node's disk is fuller than this share.
	DiskHighWater float64
	// Hold is how long a condition of the share and disk rules must hold
	// before its alert fires, so that a blip fires nothing.
	Hold time.Duration
	// NoSession is how long the full node may be without a session to the
	// coordinator, or the coordinators without a leader, before it fires.
	NoSession time.Duration
	// MismatchQuiet is how long after a node's last forged tip (or stale
	// report) its alert
	// resolves.
	MismatchQuiet time.Duration
}

// DefaultThresholds are limits that make sense for a public mirror: a
// share rule fires after 5 minutes above 5%, a node's disk after 5 minutes
// above the 85% at which nodes stop taking repositories.
func DefaultThresholds() Thresholds {
	return Thresholds{FailingShare: 0.05, StaleShare: 0.05, DiskHighWater: 0.85, Hold: 5 * time.Minute,
		NoSession: 2 * time.Minute, MismatchQuiet: time.Hour}
}

// Rule is one condition over a snapshot. Check returns the alerts whose
// condition holds now (one per subject) and whether the snapshot held the
// figures the rule needs; when it did not, the rule's alerts stay as they
// are.
type Rule struct {
	Name string
	// For is how long a condition must hold before its alert fires.
	For   time.Duration
	Check func(s *Snapshot, now time.Time) (active []Alert, known bool)
}

// The rules' names.
const (
	RuleNodeGone     = "node-gone"
	RuleReposFailing = "repos-failing"
	RuleReposStale   = "repos-stale"
	RuleDiskHigh     = "disk-high"
	RulePurgeHeld    = "purge-held"
	RuleMismatch     = "mismatch"
	RuleStaleReport  = "stale-report"
	RuleNoSession    = "no-session"
	RuleNoLeader     = "no-leader"
	RuleFeedFailing  = "feed-failing"
	// RuleFeedLimited: a rate limit has held a forge's change feed back
	// past --fed-max-age: its repositories are no longer fed.
	RuleFeedLimited = "feed-limited"
	// RuleCatalogUnreadable: the coordinator cannot read the catalog (its
	// repository missing, out of reach, not a git repository).
	RuleCatalogUnreadable = "catalog-unreadable"
	// RuleUnderReplicated: repositories with fewer healthy replicas than
	// --full-replicas (a full node silent or lost, and its share not yet
	// copied; a replica behind).
	RuleUnderReplicated = "under-replicated"
)

// Rules returns the rules with the thresholds th.
func Rules(th Thresholds) []Rule {
	return []Rule{
		// Gone is already past the node's grace: no more waiting.
		{Name: RuleNodeGone, Check: nodeGone},
		{Name: RuleReposFailing, For: th.Hold, Check: func(s *Snapshot, _ time.Time) ([]Alert, bool) {
			if s.Repos == nil {
				return nil, false
			}
			return share(RuleReposFailing, "repositories failing", s.Repos.Failing, s.Repos.Total, th.FailingShare), true
		}},
		{Name: RuleReposStale, For: th.Hold, Check: func(s *Snapshot, _ time.Time) ([]Alert, bool) {
			if s.Repos == nil {
				return nil, false
			}
			what := fmt.Sprintf("repositories not verified against their upstreams for over %s (--max-interval)", s.Repos.StaleAfter)
			return share(RuleReposStale, what, s.Repos.Stale, s.Repos.Total, th.StaleShare), true
		}},
		{Name: RuleDiskHigh, For: th.Hold, Check: func(s *Snapshot, _ time.Time) ([]Alert, bool) {
			return diskHigh(s, th.DiskHighWater)
		}},
		// A held purge waits for a person: say so at once.
		{Name: RulePurgeHeld, Check: purgeHeld},
		// A catalog that cannot be read: no repository is added or removed
		// (on a first start, none is mirrored) until it can.
		{Name: RuleCatalogUnreadable, For: th.Hold, Check: catalogUnreadable},
		// Fewer copies than promised: one more loss may lose data.
		{Name: RuleUnderReplicated, For: th.Hold, Check: underReplicated},
		{Name: RuleMismatch, Check: func(s *Snapshot, now time.Time) ([]Alert, bool) {
			return perNode(RuleMismatch, s.Mismatches, now, th.MismatchQuiet,
				"node %d served a tip the upstream never had (a forged or stale pull, refused)", "forged tips"), true
		}},
		{Name: RuleStaleReport, Check: func(s *Snapshot, now time.Time) ([]Alert, bool) {
			return perNode(RuleStaleReport, s.StaleReports, now, th.MismatchQuiet,
				"node %d reported a repository unchanged after a push the full node then found upstream (fetched from the upstream)", "stale reports"), true
		}},
		{Name: RuleNoSession, For: th.NoSession, Check: func(s *Snapshot, _ time.Time) ([]Alert, bool) {
			if s.Session.Connected || s.Session.NoLeader { // no-leader says more
				return nil, true
			}
			return []Alert{{Key: RuleNoSession, Rule: RuleNoSession, Summary: "the full node has no session with the coordinator",
				Figure: "no session", Threshold: fmt.Sprintf("%s without one", th.NoSession)}}, true
		}},
		// A forge's change feed that fails: its host is polled only, and
		// pushes wait for the checks. One alert a host.
		{Name: RuleFeedFailing, For: th.Hold, Check: func(s *Snapshot, _ time.Time) ([]Alert, bool) {
			if !s.Session.Connected {
				return nil, false
			}
			var out []Alert
			for _, h := range s.FeedsFailing {
				out = append(out, Alert{Key: RuleFeedFailing + "/" + h, Rule: RuleFeedFailing,
					Summary: fmt.Sprintf("the change feed of %s fails: its repositories are polled only", h),
					Figure:  "failing", Threshold: fmt.Sprintf("%d failed requests in a row", 3)})
			}
			return out, true
		}},
		// A forge's change feed that a rate limit holds back past the fed
		// max age: it asks nothing, so its repositories lost their cover
		// and are polled. One alert a host.
		{Name: RuleFeedLimited, For: th.Hold, Check: func(s *Snapshot, _ time.Time) ([]Alert, bool) {
			if !s.Session.Connected {
				return nil, false
			}
			var out []Alert
			for _, h := range s.FeedsLimited {
				out = append(out, Alert{Key: RuleFeedLimited + "/" + h, Rule: RuleFeedLimited,
					Summary: fmt.Sprintf("the change feed of %s is held by a rate limit: its repositories are polled only", h),
					Figure:  "feed-limited", Threshold: "held past --fed-max-age"})
			}
			return out, true
		}},
		{Name: RuleNoLeader, For: th.NoSession, Check: func(s *Snapshot, _ time.Time) ([]Alert, bool) {
			if s.Session.Connected || !s.Session.NoLeader {
				return nil, true
			}
			return []Alert{{Key: RuleNoLeader, Rule: RuleNoLeader, Summary: "the coordinators have no leader",
				Figure: "a coordinator answers that it knows no leader", Threshold: fmt.Sprintf("%s without one", th.NoSession)}}, true
		}},
	}
}

// share is a rule's alert when n of total is over limit (a share of all).
func share(rule, what string, n, total int, limit float64) []Alert {
	if total <= 0 || float64(n) <= limit*float64(total) {
		return nil
	}
	return []Alert{{Key: rule, Rule: rule, Summary: fmt.Sprintf("%s of %d %s", percent(float64(n)/float64(total)), total, what),
		Figure: fmt.Sprintf("%s (%d of %d)", percent(float64(n)/float64(total)), n, total), Threshold: percent(limit)}}
}

func percent(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func nodeName(n Node) string {
	if n.Name == "" {
		return fmt.Sprintf("node %d", n.ID)
	}
	return fmt.Sprintf("node %d (%s)", n.ID, n.Name)
}

func nodeGone(s *Snapshot, _ time.Time) ([]Alert, bool) {
	if !s.NodesKnown {
		return nil, false
	}
	var out []Alert
	for _, n := range s.Nodes {
		if n.State != "gone" {
			continue
		}
		fig := "gone"
		if !n.LastHeartbeat.IsZero() {
			fig = "last heartbeat " + stamp(n.LastHeartbeat)
		}
		out = append(out, Alert{Key: fmt.Sprintf("%s/%d", RuleNodeGone, n.ID), Rule: RuleNodeGone,
			Summary: nodeName(n) + " is gone: silent past its grace, its repositories are placed elsewhere",
			Figure:  fig, Threshold: fmt.Sprintf("grace %s", n.Grace)})
	}
	return out, true
}

func diskHigh(s *Snapshot, highWater float64) ([]Alert, bool) {
	if !s.NodesKnown {
		return nil, false
	}
	var out []Alert
	for _, n := range s.Nodes {
		if n.State == "revoked" || n.DiskTotal == 0 || float64(n.DiskUsed) <= highWater*float64(n.DiskTotal) {
			continue
		}
		out = append(out, Alert{Key: fmt.Sprintf("%s/%d", RuleDiskHigh, n.ID), Rule: RuleDiskHigh,
			Summary:   nodeName(n) + "'s disk is above its high water: it takes no new repositories",
			Figure:    fmt.Sprintf("%s used (%d of %d bytes)", percent(float64(n.DiskUsed)/float64(n.DiskTotal)), n.DiskUsed, n.DiskTotal),
			Threshold: percent(highWater)})
	}
	return out, true
}

func purgeHeld(s *Snapshot, _ time.Time) ([]Alert, bool) {
	if s.Catalog == nil {
		return nil, false
	}
	c := s.Catalog
	if c.HeldCommit == "" {
		return nil, true
	}
	return []Alert{{Key: RulePurgeHeld, Rule: RulePurgeHeld,
		Summary: fmt.Sprintf("purge protection holds the removal of %d repositories (catalog commit %.12s) until an operator confirms it", c.HeldRemoved, c.HeldCommit),
		Figure:  fmt.Sprintf("%d of %d repositories to remove", c.HeldRemoved, c.HeldAll), Threshold: "--max-purge within --purge-window"}}, true
}

func underReplicated(s *Snapshot, _ time.Time) ([]Alert, bool) {
	if s.Catalog == nil {
		return nil, false
	}
	if n := s.Catalog.UnderReplicated; n > 0 {
		return []Alert{{Key: RuleUnderReplicated, Rule: RuleUnderReplicated,
			Summary: fmt.Sprintf("%d repositories have fewer healthy replicas than --full-replicas", n),
			Figure:  fmt.Sprintf("%d repositories", n), Threshold: "--full-replicas healthy copies"}}, true
	}
	return nil, true
}

func catalogUnreadable(s *Snapshot, _ time.Time) ([]Alert, bool) {
	if s.Catalog == nil {
		return nil, false
	}
	c := s.Catalog
	if c.Error == "" {
		return nil, true
	}
	fig := "unreadable (" + c.Error + ")"
	if !c.ErrorAt.IsZero() {
		fig += " since " + stamp(c.ErrorAt)
	}
	return []Alert{{Key: RuleCatalogUnreadable, Rule: RuleCatalogUnreadable,
		Summary: "the coordinator cannot read the catalog: no repository is added or removed until it can (gitfleet ctl catalog says why)",
		Figure:  fig, Threshold: "any failure to read it"}}, true
}

// perNode is rule's alerts of a count kept by node (what it counts):
// one a node with a new one within quiet; summary names the node (%d).
func perNode(rule string, counts map[uint32]Mismatch, now time.Time, quiet time.Duration, summary, what string) []Alert {
	var out []Alert
	for id, m := range counts {
		if m.Last.IsZero() || now.Sub(m.Last) >= quiet {
			continue
		}
		out = append(out, Alert{Key: fmt.Sprintf("%s/%d", rule, id), Rule: rule,
			Summary:   fmt.Sprintf(summary, id),
			Figure:    fmt.Sprintf("%d %s in all, the last at %s", m.Total, what, stamp(m.Last)),
			Threshold: fmt.Sprintf("any new one; resolves after %s without one", quiet)})
	}
	return out
}

// MismatchWatch turns the full node's running counts of forged tips, by
// node, into the time of each node's last new one. Counts start at zero
// with the process, as the full node's do. Not safe for concurrent use.
type MismatchWatch struct {
	seen map[uint32]Mismatch
}

// Seen records that node served a forged tip at the time at, whatever the
// counts say: a restarted full node's counts start from zero, and a mismatch
// alert that was firing before keeps firing for its quiet time.
func (w *MismatchWatch) Seen(node uint32, at time.Time) {
	if w.seen == nil {
		w.seen = map[uint32]Mismatch{}
	}
	m := w.seen[node]
	if at.After(m.Last) {
		m.Last = at
	}
	w.seen[node] = m
}

// Observe records counts at now and returns every node's Mismatch.
func (w *MismatchWatch) Observe(counts map[uint32]uint64, now time.Time) map[uint32]Mismatch {
	if w.seen == nil {
		w.seen = map[uint32]Mismatch{}
	}
	for id, n := range counts {
		m := w.seen[id]
		if n > m.Total {
			m.Last = now
		}
		m.Total = n
		w.seen[id] = m
	}
	out := make(map[uint32]Mismatch, len(w.seen))
	for id, m := range w.seen {
		out[id] = m
	}
	return out
}
