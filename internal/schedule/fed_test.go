package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

const aDay = 24 * time.Hour

// changing returns the outcome of checks of repositories that change
// every 3 to 12 hours (by their number), since 60 days before t0: each
// check reports the changes since the last one.
func changing() func(key string, now time.Time) Outcome {
	seen := make(map[string]time.Time)
	return func(key string, now time.Time) Outcome {
		var n int
		fmt.Sscanf(key[strings.IndexByte(key, '/')+1:], "%d", &n)
		period := time.Duration(3+n%10) * time.Hour
		last := seen[key]
		if last.IsZero() {
			last = t0
		}
		seen[key] = now
		var ts []time.Time
		for c := t0.Add(-60 * aDay); !c.After(now); c = c.Add(period) {
			if c.After(last) {
				ts = append(ts, c)
			}
		}
		return Outcome{Changed: len(ts) > 0, ChangeTimes: ts, Fetched: len(ts) > 0}
	}
}

// pastChanges is the changes of repository n before t0, as changing makes them.
func pastChanges(n int) []time.Time {
	period := time.Duration(3+n%10) * time.Hour
	var ts []time.Time
	for c := t0.Add(-60 * aDay); !c.After(t0); c = c.Add(period) {
		ts = append(ts, c)
	}
	return ts
}

// twoHosts adds n repositories on host "fed" and n on host "polled", each
// answered for by its host's feed (when it has one that works).
func twoHosts(s *Scheduler, n int) {
	for i := range n {
		for _, h := range []string{"fed", "polled"} {
			key := fmt.Sprintf("%s/%d", h, i)
			s.Add(repokey.Key(key), h, RepoState{LastCheck: t0, ChangeTimes: pastChanges(i), Cloned: true})
			s.SetAnswered(repokey.Key(key), true)
		}
	}
}

// addAnswered adds key on hostName, answered for by its feed.
func addAnswered(s *Scheduler, key, hostName string, st RepoState) {
	s.Add(repokey.Key(key), hostName, st)
	s.SetAnswered(repokey.Key(key), true)
}

// perHost counts the checks of each host's repositories.
func perHost(starts map[string][]time.Time) map[string]int {
	out := make(map[string]int)
	for key, ts := range starts {
		h, _, _ := strings.Cut(key, "/")
		out[h] += len(ts)
	}
	return out
}

func TestAFedHostIsCheckedOncePerFedMaxIntervalAndItsBudgetGoesToTheOthers(t *testing.T) {
	const n = 50
	cfg := Config{Budget: 2 * n / 24.0, MaxInterval: 3 * aDay, FedMaxInterval: 14 * aDay}
	end := t0.Add(30 * aDay)

	s, clk := newTest(t, cfg)
	twoHosts(s, n)
	without := perHost(drive(t, s, clk, end, changing()))

	s, clk = newTest(t, cfg)
	s.SetFed("fed", true) // before its repositories are added
	twoHosts(s, n)
	starts := drive(t, s, clk, end, changing())
	with := perHost(starts)

	t.Logf("checks without the feed: %v; with it: %v", without, with)
	for i := range n {
		key := fmt.Sprintf("fed/%d", i)
		ts := starts[key]
		// The first is spread over FedMaxInterval from the last check
		// (t0), the next ones FedMaxInterval apart.
		if len(ts) == 0 || ts[0].Sub(t0) > cfg.FedMaxInterval {
			t.Errorf("%s not checked in the FedMaxInterval after t0: %v", key, ts)
			continue
		}
		for j := 1; j < len(ts); j++ {
			if gap := ts[j].Sub(ts[j-1]); gap < cfg.FedMaxInterval || gap > cfg.FedMaxInterval+time.Hour {
				t.Errorf("%s checked %v apart, want FedMaxInterval (%v)", key, gap, cfg.FedMaxInterval)
			}
		}
	}
	if got := float64(with["polled"]) / float64(without["polled"]); got < 1.6 {
		t.Errorf("the polled host got %.2f x the checks it got without the other's feed, want >= 1.6 (the budget of the fed host)", got)
	}
	if got := float64(with["fed"]+with["polled"]) / float64(without["fed"]+without["polled"]); got < 0.9 || got > 1.1 {
		t.Errorf("%.2f x the checks without the feed, want about the same: the budget is spent either way", got)
	}
}

func TestAHostThatStopsBeingFedIsBackToNormalChecksPromptly(t *testing.T) {
	const n = 50
	cfg := Config{Budget: 2 * n / 24.0, MaxInterval: 2 * aDay, FedMaxInterval: 14 * aDay}
	unfed := t0.Add(10 * aDay)
	end := t0.Add(20 * aDay)

	// The same run without the feed, for the checks of normal times.
	s, clk := newTest(t, cfg)
	twoHosts(s, n)
	normal := drive(t, s, clk, end, changing())

	s, clk = newTest(t, cfg)
	twoHosts(s, n)
	outcome := changing()
	fed := t0.Add(aDay)
	drive(t, s, clk, fed, outcome)
	clk.Set(fed)
	s.SetFed("fed", true) // its repositories scheduled by the policy until now
	fedTime := drive(t, s, clk, unfed, outcome)
	clk.Set(unfed)
	s.SetFed("fed", false)
	if st := s.Stats(); st.Overdue > n/10 {
		t.Errorf("%d repositories due the instant the feed stopped, want the host's %d spread out", st.Overdue, n)
	}
	after := drive(t, s, clk, end, outcome)

	for i := range n {
		key := fmt.Sprintf("fed/%d", i)
		// Checked last on the first day at the latest, none is due
		// again before FedMaxInterval.
		if ts := fedTime[key]; len(ts) > 0 {
			t.Errorf("%s checked while fed: %v", key, ts)
		}
		if ts := after[key]; len(ts) == 0 || ts[0].Sub(unfed) > cfg.MaxInterval {
			t.Errorf("%s not checked within MaxInterval of its feed stopping: %v", key, ts)
		}
	}
	// From a aDay after the feed stopped, its host is checked as often as
	// in the run without a feed.
	count := func(starts map[string][]time.Time) int {
		c := 0
		for key, ts := range starts {
			if strings.HasPrefix(key, "fed/") {
				for _, at := range ts {
					if at.After(unfed.Add(aDay)) {
						c++
					}
				}
			}
		}
		return c
	}
	if got, want := count(after), count(normal); float64(got) < 0.8*float64(want) || float64(got) > 1.25*float64(want) {
		t.Errorf("%d checks of the formerly fed host from a aDay after, want about %d as without a feed", got, want)
	}
}

func TestTheOtherHostsChecksArePricedLowerAtOnceWhenAHostIsFed(t *testing.T) {
	const n = 50
	s, _ := newTest(t, Config{Budget: 2 * n / 24.0, MaxInterval: 3 * aDay, FedMaxInterval: 14 * aDay})
	twoHosts(s, n)
	s.Stats() // places the first checks: the policy prices them
	pol := s.pol.(*adaptive)
	l := learnedRate(s, "polled/0")
	before := pol.interval(l)
	s.SetFed("fed", true)
	if after := pol.interval(l); after > before*6/10 {
		t.Errorf("a polled repository's interval went from %v to %v when the other half became fed, want it about halved", before, after)
	}
}

func TestUrgentChecksOfAFedHostAreUnchanged(t *testing.T) {
	s, clk := newTest(t, Config{Budget: 10, FedMaxInterval: 10 * aDay})
	s.SetFed("h", true)
	addAnswered(s, "a", "h", cloned(t0))
	addAnswered(s, "b", "h", cloned(t0))
	clk.Advance(time.Hour)
	s.Urgent("b")
	if key, ok, _ := s.Next(); !ok || key != "b" {
		t.Fatalf("Next = %q, %v; want the urgent b at once", key, ok)
	}
	s.Done("b", success)
	if due := s.repos["b"].notBefore; !due.Equal(clk.Now().Add(10 * aDay)) {
		t.Errorf("after an urgent check, b is due %v later, want FedMaxInterval", due.Sub(clk.Now()))
	}
}

func TestAFailingRepositoryOfAFedHostRetriesAsAnyOther(t *testing.T) {
	s, clk := newTest(t, Config{Budget: 10, FedMaxInterval: 10 * aDay})
	s.SetFed("h", true)
	addAnswered(s, "a", "h", cloned(t0))
	s.Urgent("a")
	s.Next()
	s.Done("a", Outcome{Class: Transient})
	if due := s.repos["a"].notBefore.Sub(clk.Now()); due > 2*time.Hour {
		t.Errorf("a failing check of a fed host is retried %v later, want its retry delay", due)
	}
}

func TestFedHostsKeepTheirCountAsRepositoriesMove(t *testing.T) {
	s, _ := newTest(t, Config{Budget: 10})
	s.SetFed("fed", true)
	addAnswered(s, "a", "fed", cloned(t0))
	addAnswered(s, "b", "fed", cloned(t0))
	addAnswered(s, "c", "polled", cloned(t0))
	s.Add("a", "polled", cloned(t0)) // moved
	s.Remove("b")
	s.Add("c", "fed", cloned(t0)) // moved
	if s.fedLive != 1 {
		t.Errorf("%d repositories counted on fed hosts, want 1 (c)", s.fedLive)
	}
	s.SetFed("fed", false)
	s.SetFed("polled", true)
	if s.fedLive != 1 {
		t.Errorf("%d repositories counted on fed hosts, want 1 (a)", s.fedLive)
	}
	for _, h := range s.hostList {
		for i, r := range h.members {
			if r.hostIdx != i || r.host != h {
				t.Errorf("%s at %d of %s's members, says %d of %s", r.key, i, h.name, r.hostIdx, r.host.name)
			}
		}
	}
	for key, r := range s.repos {
		if counted, want := r.est.bin >= 0, key == "c"; counted != want {
			t.Errorf("%s counted in the rate histogram: %v, want %v (a is fed, c is not)", key, counted, want)
		}
	}
}

func TestFedMaxIntervalDefaultsAndBounds(t *testing.T) {
	tests := []struct {
		max, fed, want time.Duration // want 0: refused
	}{
		{0, 0, 7 * aDay},
		{10 * aDay, 0, 10 * aDay},
		{aDay, 2 * aDay, 2 * aDay},
		{aDay, aDay, aDay},
		{2 * aDay, aDay, 0},
	}
	for _, tt := range tests {
		s, err := New(Config{MaxInterval: tt.max, FedMaxInterval: tt.fed}, clock.NewFake(t0))
		switch {
		case tt.want == 0 && err == nil:
			t.Errorf("max %v, fed max %v: accepted, want refused", tt.max, tt.fed)
		case tt.want != 0 && err != nil:
			t.Errorf("max %v, fed max %v: %v", tt.max, tt.fed, err)
		case tt.want != 0 && s.cfg.FedMaxInterval != tt.want:
			t.Errorf("max %v, fed max %v: fed max is %v, want %v", tt.max, tt.fed, s.cfg.FedMaxInterval, tt.want)
		}
	}
}

// A repository of a host whose feed works is fed only while the feed
// answered for it: one it never answered for (its forge cannot name it, or
// does not know it) is checked by the policy within MaxInterval, not left
// to a weekly safety net; one whose answers stop goes back to the policy.
func TestARepositoryTheFeedDoesNotAnswerForIsCheckedAsUnfed(t *testing.T) {
	cfg := Config{Budget: 10, MaxInterval: aDay, FedMaxInterval: 14 * aDay}
	s, clk := newTest(t, cfg)
	s.SetFed("github.com", true)
	s.Add("github.com/group/sub/project", "github.com", cloned(t0)) // never answered for
	addAnswered(s, "github.com/o/answered", "github.com", cloned(t0))
	addAnswered(s, "github.com/o/stops", "github.com", cloned(t0))
	if s.fedLive != 2 {
		t.Fatalf("%d repositories counted fed, want 2", s.fedLive)
	}
	starts := drive(t, s, clk, t0.Add(3*aDay), func(string, time.Time) Outcome { return success })
	if n := len(starts["github.com/group/sub/project"]); n < 3 {
		t.Errorf("the repository the feed never answered for was checked %d times in 3 days, want at least daily (MaxInterval)", n)
	}
	if n := len(starts["github.com/o/answered"]); n > 1 {
		t.Errorf("the answered repository was checked %d times in 3 days, want its safety net only", n)
	}
	// The feed's answers for one stop: it is back to the policy.
	clk.Set(t0.Add(3 * aDay))
	s.SetAnswered("github.com/o/stops", false)
	if s.fedLive != 1 {
		t.Fatalf("%d repositories counted fed after one lost its answers, want 1", s.fedLive)
	}
	starts = drive(t, s, clk, t0.Add(6*aDay), func(string, time.Time) Outcome { return success })
	if n := len(starts["github.com/o/stops"]); n < 2 {
		t.Errorf("a repository whose answers stopped was checked %d times in 3 days, want about daily", n)
	}
}
