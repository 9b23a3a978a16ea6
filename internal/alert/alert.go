// Package alert tells a mirror's operators when something is wrong, once
// when it starts and once when it ends.
//
// The rules (rules.go) are pure functions of a Snapshot: figures the full
// node already keeps (repositories by state, the nodes of the fleet, the
// catalog's held purge and whether it can be read, forged tips, the
// session to the coordinator). The
// Evaluator (evaluate.go) is a pure state machine fed with snapshots and
// the time of an injected clock: it returns the alerts that start firing,
// after their rule's For, and those that resolve, each exactly once, and
// its state can be saved and restored so that a restart does not fire
// again. The Notifier (notify.go) delivers those events to receivers named
// by URL (a JSON webhook, Slack, DingTalk, Lark/Feishu, email over SMTP),
// every connection through the egress dialer, with bounded retries, never
// blocking its caller. This package reads no figures itself and does not
// decide when to evaluate: the full node does both (internal/fullnode).
package alert

import (
	"fmt"
	"time"
)

// Snapshot is what the rules look at: the figures of one moment. A figure
// the full node could not read (the coordinator out of reach) is nil or
// false in its Known field, and the rules that need it leave their alerts
// as they are: an alert never resolves for want of a figure.
type Snapshot struct {
	// Repos are the repositories' counters; nil when unknown.
	Repos *Repos
	// Nodes are the fleet's nodes, as the coordinator lists them; nil when
	// the coordinator did not answer.
	Nodes []Node
	// NodesKnown tells whether Nodes was read (an empty fleet is known).
	NodesKnown bool
	// Catalog is the catalog's status; nil when unknown.
	Catalog *Catalog
	// Mismatches are, by node, when that node last served a tip the
	// upstream never had (see MismatchWatch).
	Mismatches map[uint32]Mismatch
	// StaleReports are, by node, when that node was last counted a stale
	// report: a repository reported unchanged after a push that the full
	// node then found upstream (counted as Mismatches are).
	StaleReports map[uint32]Mismatch
	// Session is the full node's session to the coordinator.
	Session Session
	// FeedsFailing are the forge hosts whose change feed fails, as the
	// coordinator says; FeedsLimited those whose feed a rate limit has
	// held back past --fed-max-age.
	FeedsFailing []string
	FeedsLimited []string
}

// Repos are counters the full node keeps as states change.
type Repos struct {
	Total   int
	Failing int
	// Stale are the repositories not verified against their upstreams
	// (their verified_at) within StaleAfter.
	Stale      int
	StaleAfter time.Duration
}

// Node is one node of the fleet.
type Node struct {
	ID    uint32
	Name  string
	State string // alive, suspect, gone, revoked
	// LastHeartbeat is zero when the node never sent one.
	LastHeartbeat time.Time
	Grace         time.Duration
	// DiskUsed and DiskTotal are zero when the node reported no disk.
	DiskUsed, DiskTotal uint64
}

// Catalog is the catalog's status: a change whose removals purge
// protection holds, if any, and whether it can be read.
type Catalog struct {
	HeldCommit           string // "" when nothing is held
	HeldRemoved, HeldAll int
	// Error is why the catalog cannot be read (the class of the error: an
	// alert goes to chat rooms and mailboxes, and the text names the
	// catalog's URL), "" when it can; ErrorAt is since when.
	Error   string
	ErrorAt time.Time
	// UnderReplicated counts the repositories with fewer healthy replicas
	// (confirmed, on a full node alive now, not behind) than the tier's.
	UnderReplicated int
}

// Mismatch is a node's forged tips: how many in all, and when the last
// new one was seen.
type Mismatch struct {
	Total uint64
	Last  time.Time
}

// Session is the full node's link to the coordinator.
type Session struct {
	Connected bool
	// NoLeader: the last coordinator asked said it knows no leader (an
	// election that does not end).
	NoLeader bool
}

// Status is whether an Event starts or ends an alert.
type Status string

// The two statuses of an event.
const (
	Firing   Status = "firing"
	Resolved Status = "resolved"
)

// Alert is one condition of one rule, on one subject (a node, or the
// whole mirror).
type Alert struct {
	// Key names the alert: its rule, and its subject when the rule has
	// several ("node-gone/7").
	Key  string
	Rule string
	// Summary says what is wrong, for people.
	Summary string
	// Figure is the value that crossed the threshold (in a resolution,
	// the last one seen while it held), Threshold the limit.
	Figure, Threshold string
	// Since is when the condition was first seen (before its rule's For).
	Since time.Time
}

// Event is an alert that starts firing or resolves.
type Event struct {
	Alert
	Status Status
	// At is when it fired or resolved.
	At time.Time
}

// Text is the event as a few lines for people: what fired or resolved,
// since when, the figure and the threshold, and the console's address.
func (e Event) Text(console string) string {
	head := "FIRING"
	if e.Status == Resolved {
		head = "RESOLVED"
	}
	s := fmt.Sprintf("[%s] gitfleet %s: %s\n", head, e.Rule, e.Summary)
	if e.Status == Resolved {
		s += fmt.Sprintf("Resolved at %s, after %s (since %s).\n", stamp(e.At), e.At.Sub(e.Since).Round(time.Second), stamp(e.Since))
	} else {
		s += fmt.Sprintf("Since %s.\n", stamp(e.Since))
	}
	if e.Status == Resolved {
		s += fmt.Sprintf("Last figure while it held: %s; threshold: %s.\n", e.Figure, e.Threshold)
	} else {
		s += fmt.Sprintf("Figure: %s; threshold: %s.\n", e.Figure, e.Threshold)
	}
	if console != "" {
		s += "Console: " + console + "\n"
	}
	return s
}

// Subject is a one-line title of the event (an email's subject).
func (e Event) Subject() string {
	head := "FIRING"
	if e.Status == Resolved {
		head = "RESOLVED"
	}
	return fmt.Sprintf("[%s] gitfleet %s: %s", head, e.Rule, e.Summary)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
