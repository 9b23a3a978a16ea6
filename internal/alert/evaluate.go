package alert

import (
	"sort"
	"time"
)

// Evaluator decides when alerts fire and resolve: an alert fires once its
// condition has held for its rule's For, and not again while it holds; it
// resolves once when the condition ends. A condition that ends before its
// For fires nothing. It is a pure state machine (no I/O, no clock of its
// own, no goroutine); it is not safe for concurrent use.
type Evaluator struct {
	rules  []Rule
	active map[string]*tracked
}

type tracked struct {
	alert  Alert
	firing bool
}

// NewEvaluator returns an evaluator of rules with no alert active.
func NewEvaluator(rules []Rule) *Evaluator {
	return &Evaluator{rules: rules, active: map[string]*tracked{}}
}

// Evaluate applies every rule to s at now and returns the events it
// causes, in a stable order.
func (e *Evaluator) Evaluate(s *Snapshot, now time.Time) []Event {
	var events []Event
	for _, r := range e.rules {
		alerts, known := r.Check(s, now)
		if !known {
			continue // the rule's alerts stay as they are
		}
		holds := make(map[string]bool, len(alerts))
		for _, a := range alerts {
			holds[a.Key] = true
			t := e.active[a.Key]
			if t == nil {
				a.Since = now
				t = &tracked{alert: a}
				e.active[a.Key] = t
			} else {
				a.Since = t.alert.Since
				t.alert = a // the latest figure
			}
			if !t.firing && now.Sub(a.Since) >= r.For {
				t.firing = true
				events = append(events, Event{Alert: a, Status: Firing, At: now})
			}
		}
		for key, t := range e.active {
			if t.alert.Rule != r.Name || holds[key] {
				continue
			}
			delete(e.active, key)
			if t.firing {
				events = append(events, Event{Alert: t.alert, Status: Resolved, At: now})
			}
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].Key < events[j].Key })
	return events
}

// Firing returns the alerts that have fired and not resolved, by key: what
// a node keeps so that a restart does not fire them again.
func (e *Evaluator) Firing() []Alert {
	var out []Alert
	for _, t := range e.active {
		if t.firing {
			out = append(out, t.alert)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Restore marks alerts as firing (those Firing returned before a
// restart): they fire no more while their condition holds, and resolve
// once when it ends. It returns the alerts of rules the evaluator does not
// have, which it ignores.
func (e *Evaluator) Restore(alerts []Alert) (unknown []Alert) {
	for _, a := range alerts {
		known := false
		for _, r := range e.rules {
			if r.Name == a.Rule {
				e.active[a.Key] = &tracked{alert: a, firing: true}
				known = true
				break
			}
		}
		if !known {
			unknown = append(unknown, a)
		}
	}
	return unknown
}
