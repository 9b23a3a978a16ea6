package alert

import (
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func failing(n, total int) *Snapshot {
	return &Snapshot{Repos: &Repos{Total: total, Failing: n, StaleAfter: time.Hour}, Session: Session{Connected: true}}
}

// statuses lists the events as "status key".
func statuses(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Status)+" "+e.Key)
	}
	return out
}

func TestAnAlertFiresOnceAfterItsForHoldsAndResolvesOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	e := NewEvaluator(Rules(DefaultThresholds())) // failing: 5%, held 5 minutes
	var all []Event
	step := func(s *Snapshot, d time.Duration) []Event {
		clk.Advance(d)
		evs := e.Evaluate(s, clk.Now())
		all = append(all, evs...)
		return evs
	}
	if evs := step(failing(10, 100), 0); len(evs) != 0 {
		t.Fatalf("fired at once, before its 5 minutes: %v", statuses(evs))
	}
	if evs := step(failing(12, 100), 4*time.Minute+59*time.Second); len(evs) != 0 {
		t.Fatalf("fired before 5 minutes: %v", statuses(evs))
	}
	evs := step(failing(11, 100), time.Second)
	if len(evs) != 1 || evs[0].Status != Firing || evs[0].Key != RuleReposFailing {
		t.Fatalf("after 5 minutes: %v, want one firing %s", statuses(evs), RuleReposFailing)
	}
	if f := evs[0]; !f.Since.Equal(t0) || f.Figure != "11.0% (11 of 100)" || f.Threshold != "5.0%" {
		t.Fatalf("firing: since %v figure %q threshold %q", f.Since, f.Figure, f.Threshold)
	}
	for range 20 { // it holds: nothing more
		if evs := step(failing(30, 100), 15*time.Second); len(evs) != 0 {
			t.Fatalf("fired again while it holds: %v", statuses(evs))
		}
	}
	evs = step(failing(5, 100), 15*time.Second) // 5% is not above 5%
	if len(evs) != 1 || evs[0].Status != Resolved || !evs[0].Since.Equal(t0) || evs[0].Figure != "30.0% (30 of 100)" {
		t.Fatalf("resolution: %+v", evs)
	}
	for range 5 {
		if evs := step(failing(0, 100), 15*time.Second); len(evs) != 0 {
			t.Fatalf("resolved again: %v", statuses(evs))
		}
	}
	if len(all) != 2 {
		t.Fatalf("events %v, want one firing and one resolution", statuses(all))
	}
	if txt := all[1].Text("http://mirror/-/"); !strings.Contains(txt, "Resolved at 2026-11-25T12:10:15Z, after 10m15s (since 2026-11-25T12:00:00Z)") ||
		!strings.Contains(txt, "Last figure while it held: 30.0% (30 of 100); threshold: 5.0%.") || !strings.Contains(txt, "Console: http://mirror/-/") {
		t.Fatalf("resolution text:\n%s", all[1].Text("http://mirror/-/"))
	}
}

func TestABlipShorterThanForFiresNothing(t *testing.T) {
	e := NewEvaluator(Rules(DefaultThresholds()))
	now := t0
	for i, s := range []*Snapshot{failing(50, 100), failing(50, 100), failing(0, 100), failing(50, 100), failing(0, 100)} {
		if evs := e.Evaluate(s, now); len(evs) != 0 {
			t.Fatalf("step %d: %v", i, statuses(evs))
		}
		now = now.Add(2 * time.Minute)
	}
}

func TestAnUnknownFigureNeitherFiresNorResolves(t *testing.T) {
	th := DefaultThresholds()
	th.Hold = 0
	e := NewEvaluator(Rules(th))
	if evs := e.Evaluate(failing(50, 100), t0); len(evs) != 1 {
		t.Fatalf("%v", statuses(evs))
	}
	// The coordinator out of reach: no repositories' figures, no nodes.
	for i := range 10 {
		s := &Snapshot{Session: Session{Connected: true}}
		if evs := e.Evaluate(s, t0.Add(time.Duration(i+1)*time.Minute)); len(evs) != 0 {
			t.Fatalf("resolved for want of a figure: %v", statuses(evs))
		}
	}
	if evs := e.Evaluate(failing(0, 100), t0.Add(time.Hour)); len(evs) != 1 || evs[0].Status != Resolved {
		t.Fatalf("%v", statuses(evs))
	}
}

func TestRestoredAlertsFireNoMoreAndResolveOnce(t *testing.T) {
	th := DefaultThresholds()
	gone := &Snapshot{Session: Session{Connected: true}, NodesKnown: true, Nodes: []Node{{ID: 7, Name: "w7", State: "gone", Grace: 10 * time.Minute}}}
	first := NewEvaluator(Rules(th))
	if evs := first.Evaluate(gone, t0); len(evs) != 1 || evs[0].Key != "node-gone/7" {
		t.Fatalf("%v", statuses(evs))
	}
	kept := first.Firing()

	// A restart: a new evaluator, given what the first kept.
	second := NewEvaluator(Rules(th))
	if unknown := second.Restore(append(kept, Alert{Key: "retired-rule", Rule: "retired-rule"})); len(unknown) != 1 || unknown[0].Key != "retired-rule" {
		t.Fatalf("unknown rules: %+v", unknown)
	}
	if evs := second.Evaluate(gone, t0.Add(time.Minute)); len(evs) != 0 {
		t.Fatalf("fired again after a restart: %v", statuses(evs))
	}
	back := &Snapshot{Session: Session{Connected: true}, NodesKnown: true, Nodes: []Node{{ID: 7, Name: "w7", State: "alive"}}}
	evs := second.Evaluate(back, t0.Add(2*time.Minute))
	if len(evs) != 1 || evs[0].Status != Resolved || !evs[0].Since.Equal(t0) {
		t.Fatalf("%+v", evs)
	}
	if evs := second.Evaluate(back, t0.Add(3*time.Minute)); len(evs) != 0 {
		t.Fatalf("%v", statuses(evs))
	}
}

// TestEachRuleFiresOnItsCondition drives every rule through its condition
// and back, with a fake clock: the firing after the rule's For, and the
// resolution, each once.
func TestEachRuleFiresOnItsCondition(t *testing.T) {
	th := DefaultThresholds()
	connected := Session{Connected: true}
	for _, tc := range []struct {
		name, key string
		wait      time.Duration // the rule's For
		on, off   *Snapshot
		figure    string
	}{
		{"a node gone past its grace", "node-gone/3", 0,
			&Snapshot{NodesKnown: true, Nodes: []Node{{ID: 2, State: "alive"}, {ID: 3, Name: "lab", State: "gone", Grace: 10 * time.Minute,
				LastHeartbeat: t0.Add(-11 * time.Minute)}}},
			&Snapshot{NodesKnown: true, Nodes: []Node{{ID: 2, State: "alive"}, {ID: 3, State: "alive"}}},
			"last heartbeat 2026-11-25T11:49:00Z"},
		{"a suspect node within its grace is not gone", "", 0,
			&Snapshot{NodesKnown: true, Nodes: []Node{{ID: 3, State: "suspect"}}}, nil, ""},
		{"failing repositories above their share", "repos-failing", th.Hold, failing(6, 100), failing(1, 100), "6.0% (6 of 100)"},
		{"stale repositories above their share", "repos-stale", th.Hold,
			&Snapshot{Repos: &Repos{Total: 1000, Stale: 51, StaleAfter: 24 * time.Hour}},
			&Snapshot{Repos: &Repos{Total: 1000, Stale: 50, StaleAfter: 24 * time.Hour}}, "5.1% (51 of 1000)"},
		{"a node's disk above its high water", "disk-high/4", th.Hold,
			&Snapshot{NodesKnown: true, Nodes: []Node{{ID: 4, State: "alive", DiskUsed: 90, DiskTotal: 100}}},
			&Snapshot{NodesKnown: true, Nodes: []Node{{ID: 4, State: "alive", DiskUsed: 80, DiskTotal: 100}}},
			"90.0% used (90 of 100 bytes)"},
		{"a held purge", "purge-held", 0,
			&Snapshot{Catalog: &Catalog{HeldCommit: "0123456789abcdef", HeldRemoved: 300, HeldAll: 1000}},
			&Snapshot{Catalog: &Catalog{}}, "300 of 1000 repositories to remove"},
		{"no session with the coordinator", "no-session", th.NoSession,
			&Snapshot{}, &Snapshot{Session: connected}, "no session"},
		{"coordinators without a leader", "no-leader", th.NoSession,
			&Snapshot{Session: Session{NoLeader: true}}, &Snapshot{Session: connected}, "a coordinator answers that it knows no leader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			e := NewEvaluator(Rules(th))
			var got []Event
			for range 3 {
				got = append(got, e.Evaluate(connect(tc.on), clk.Now())...)
				clk.Advance(tc.wait)
			}
			if tc.key == "" {
				if len(got) != 0 {
					t.Fatalf("fired: %v", statuses(got))
				}
				return
			}
			if len(got) != 1 || got[0].Status != Firing || got[0].Key != tc.key || got[0].Figure != tc.figure {
				t.Fatalf("got %+v, want one firing %s with figure %q", got, tc.key, tc.figure)
			}
			if tc.wait > 0 && !got[0].At.Equal(t0.Add(tc.wait)) {
				t.Fatalf("fired at %v, want after its For, %v", got[0].At, t0.Add(tc.wait))
			}
			got = nil
			for range 3 {
				got = append(got, e.Evaluate(connect(tc.off), clk.Now())...)
				clk.Advance(15 * time.Second)
			}
			if len(got) != 1 || got[0].Status != Resolved || got[0].Key != tc.key {
				t.Fatalf("got %v, want one resolution", statuses(got))
			}
		})
	}
}

// connect is s with a session, unless s is about the session.
func connect(s *Snapshot) *Snapshot {
	if s == nil || s.Session != (Session{}) || s.Repos == nil && s.Nodes == nil && s.Catalog == nil {
		return s
	}
	c := *s
	c.Session.Connected = true
	return &c
}

func TestANewMismatchFiresAndResolvesAfterAQuietHour(t *testing.T) {
	th := DefaultThresholds()
	e := NewEvaluator(Rules(th))
	var w MismatchWatch
	now := t0
	eval := func(counts map[uint32]uint64) []Event {
		evs := e.Evaluate(&Snapshot{Session: Session{Connected: true}, Mismatches: w.Observe(counts, now)}, now)
		now = now.Add(15 * time.Minute)
		return evs
	}
	if evs := eval(map[uint32]uint64{}); len(evs) != 0 {
		t.Fatal(statuses(evs))
	}
	evs := eval(map[uint32]uint64{5: 1})
	if len(evs) != 1 || evs[0].Key != "mismatch/5" || evs[0].Status != Firing {
		t.Fatal(statuses(evs))
	}
	// More of them keep it firing, once; an hour without one resolves it.
	var more []Event
	for _, n := range []uint64{2, 2, 3, 3, 3, 3} {
		more = append(more, eval(map[uint32]uint64{5: n})...)
	}
	if len(more) != 0 {
		t.Fatal(statuses(more))
	}
	evs = eval(map[uint32]uint64{5: 3})
	if len(evs) != 1 || evs[0].Status != Resolved {
		t.Fatal(statuses(evs))
	}
}

func TestAFailingFeedFiresOneAlertAHostAfterItsHold(t *testing.T) {
	e := NewEvaluator(Rules(DefaultThresholds()))
	snap := &Snapshot{Session: Session{Connected: true}, FeedsFailing: []string{"github.com", "gitlab.com"}}
	if evs := e.Evaluate(snap, t0); len(evs) != 0 {
		t.Fatalf("fired at once: %v", statuses(evs))
	}
	evs := e.Evaluate(snap, t0.Add(5*time.Minute))
	if got := statuses(evs); len(got) != 2 || got[0] != "firing feed-failing/github.com" && got[1] != "firing feed-failing/github.com" {
		t.Fatalf("after the hold: %v", got)
	}
	snap.FeedsFailing = []string{"gitlab.com"}
	if got := statuses(e.Evaluate(snap, t0.Add(6*time.Minute))); len(got) != 1 || got[0] != "resolved feed-failing/github.com" {
		t.Fatalf("github.com answers again: %v", got)
	}
}

func TestANewStaleReportFiresForItsNodeAndResolvesAfterAQuietHour(t *testing.T) {
	e := NewEvaluator(Rules(DefaultThresholds()))
	var w MismatchWatch
	now := t0
	eval := func(counts map[uint32]uint64) []Event {
		evs := e.Evaluate(&Snapshot{Session: Session{Connected: true}, StaleReports: w.Observe(counts, now)}, now)
		now = now.Add(15 * time.Minute)
		return evs
	}
	if evs := eval(map[uint32]uint64{7: 0}); len(evs) != 0 {
		t.Fatal(statuses(evs))
	}
	evs := eval(map[uint32]uint64{7: 1})
	if len(evs) != 1 || evs[0].Key != "stale-report/7" || evs[0].Status != Firing || !strings.Contains(evs[0].Summary, "node 7") {
		t.Fatal(statuses(evs))
	}
	var quiet []Event
	for range 3 {
		quiet = append(quiet, eval(map[uint32]uint64{7: 1})...)
	}
	if len(quiet) != 0 {
		t.Fatal(statuses(quiet))
	}
	if evs := eval(map[uint32]uint64{7: 1}); len(evs) != 1 || evs[0].Status != Resolved {
		t.Fatal(statuses(evs))
	}
}

func TestAnUnreadableCatalogFiresAfterItsHoldAndResolvesOnceRead(t *testing.T) {
	e := NewEvaluator(Rules(DefaultThresholds()))
	since := t0.Add(-time.Minute)
	snap := &Snapshot{Session: Session{Connected: true}, Catalog: &Catalog{Error: "not found", ErrorAt: since}}
	if evs := e.Evaluate(snap, t0); len(evs) != 0 {
		t.Fatalf("fired at once: %v", statuses(evs))
	}
	evs := e.Evaluate(snap, t0.Add(5*time.Minute))
	if got := statuses(evs); len(got) != 1 || got[0] != "firing catalog-unreadable" {
		t.Fatalf("after the hold: %v", got)
	}
	if a := evs[0].Alert; !strings.Contains(a.Figure, "not found") || !strings.Contains(a.Figure, since.UTC().Format(time.RFC3339)) {
		t.Errorf("the figure does not say why and since when: %+v", a)
	}
	if evs := e.Evaluate(&Snapshot{Session: Session{Connected: true}}, t0.Add(6*time.Minute)); len(evs) != 0 {
		t.Fatalf("the catalog's status unknown: %v, want the alert kept as it is", statuses(evs))
	}
	snap.Catalog = &Catalog{}
	if got := statuses(e.Evaluate(snap, t0.Add(7*time.Minute))); len(got) != 1 || got[0] != "resolved catalog-unreadable" {
		t.Fatalf("the catalog is read again: %v", got)
	}
}

// Repositories short of replicas fire after the hold, with their count,
// and resolve once every one is held by enough full nodes again.
func TestUnderReplicatedRepositoriesFireAfterTheHold(t *testing.T) {
	e := NewEvaluator(Rules(DefaultThresholds()))
	snap := &Snapshot{Session: Session{Connected: true}, Catalog: &Catalog{UnderReplicated: 12}}
	if evs := e.Evaluate(snap, t0); len(evs) != 0 {
		t.Fatalf("fired at once: %v", statuses(evs))
	}
	evs := e.Evaluate(snap, t0.Add(5*time.Minute))
	if got := statuses(evs); len(got) != 1 || got[0] != "firing under-replicated" || !strings.Contains(evs[0].Alert.Figure, "12") {
		t.Fatalf("after the hold: %v %+v", got, evs)
	}
	snap.Catalog = &Catalog{}
	if got := statuses(e.Evaluate(snap, t0.Add(6*time.Minute))); len(got) != 1 || got[0] != "resolved under-replicated" {
		t.Fatalf("every repository held again: %v", got)
	}
}
