package schedule

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// t0 is a Monday, 00:00 UTC.
var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func newTest(t *testing.T, cfg Config) (*Scheduler, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	s, err := New(cfg, clk)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s, clk
}

// cloned is the state of a mirror checked at t with no known history.
func cloned(lastCheck time.Time) RepoState {
	return RepoState{LastCheck: lastCheck, Cloned: true}
}

var success = Outcome{}

// drive runs the scheduler until the fake clock reaches end, answering
// every check with outcome(key, now), and returns the start times of the
// checks of each key.
func drive(t *testing.T, s *Scheduler, clk *clock.Fake, end time.Time, outcome func(key string, now time.Time) Outcome) map[string][]time.Time {
	t.Helper()
	starts := make(map[string][]time.Time)
	for steps := 0; ; steps++ {
		if steps > 1_000_000 {
			t.Fatal("drive: too many steps")
		}
		key, ok, wait := s.Next()
		now := clk.Now()
		if ok {
			starts[string(key)] = append(starts[string(key)], now)
			s.Done(key, outcome(string(key), now))
			continue
		}
		if wait == 0 || !now.Add(wait).Before(end) {
			return starts
		}
		clk.Advance(wait)
	}
}

func always(o Outcome) func(string, time.Time) Outcome {
	return func(string, time.Time) Outcome { return o }
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"unknown policy", Config{Policy: "lifo"}},
		{"negative budget", Config{Budget: -1}},
		{"NaN budget", Config{Budget: math.NaN()}},
		{"infinite budget", Config{Budget: math.Inf(1)}},
		{"negative concurrency", Config{Concurrency: -1}},
		{"negative max interval", Config{MaxInterval: -time.Hour}},
		{"negative min interval", Config{MinInterval: -time.Minute}},
		{"min above max", Config{MinInterval: 2 * time.Hour, MaxInterval: time.Hour}},
		{"zero host limit", Config{HostLimits: map[string]float64{"github.com": 0}}},
		{"negative host limit", Config{HostLimits: map[string]float64{"github.com": -5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg, clock.NewFake(t0)); err == nil {
				t.Errorf("New(%+v) accepted a bad config", tt.cfg)
			}
		})
	}
	if _, err := New(Config{}, nil); err == nil {
		t.Error("New accepted a nil clock")
	}
}

func TestNewFillsDefaults(t *testing.T) {
	s, _ := newTest(t, Config{})
	c := s.cfg
	if c.Policy != PolicyAdaptive || c.Concurrency != 10 || c.MaxInterval != 24*time.Hour || c.MinInterval != time.Minute {
		t.Errorf("defaults = %+v, want adaptive, 10, 24h, 1m", c)
	}
}

func TestNextWithNothingScheduledWaitsForAnEvent(t *testing.T) {
	s, _ := newTest(t, Config{})
	if key, ok, wait := s.Next(); ok || wait != 0 {
		t.Errorf("Next() = %q, %v, %v; want nothing and wait 0", key, ok, wait)
	}
}

func TestNotClonedRepoGoesToUrgentLane(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed, Budget: 1})
	s.Add("a", "h", cloned(t0))
	s.Add("new", "h", RepoState{})
	key, ok, _ := s.Next()
	if !ok || key != "new" {
		t.Fatalf("Next() = %q, %v; want the repository to clone", key, ok)
	}
	s.Done("new", Outcome{Fetched: true})
	if !s.repos["new"].cloned {
		t.Error("a successful first check did not mark the repository cloned")
	}
	_ = clk
}

func TestUrgentOvertakesBackground(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed})
	for i := range 5 {
		s.Add(repokey.Key(fmt.Sprint("bg", i)), "h", cloned(t0.Add(-48*time.Hour)))
	}
	s.Add("hook", "h", cloned(t0))
	clk.Advance(time.Hour)
	s.Urgent("hook")
	if key, ok, _ := s.Next(); !ok || key != "hook" {
		t.Errorf("Next() = %q, %v; want the urgent repository first", key, ok)
	}
	if key, ok, _ := s.Next(); !ok || key == "hook" {
		t.Errorf("Next() = %q, %v; want a background repository next", key, ok)
	}
}

func TestUrgentChecksInOrderAsked(t *testing.T) {
	s, _ := newTest(t, Config{})
	for _, k := range []string{"a", "b", "c"} {
		s.Add(repokey.Key(k), "h"+k, cloned(t0))
	}
	for _, k := range []string{"c", "a", "b"} {
		s.Urgent(repokey.Key(k))
	}
	for _, want := range []string{"c", "a", "b"} {
		if key, _, _ := s.Next(); key != repokey.Key(want) {
			t.Errorf("Next() = %q, want %q", key, want)
		}
	}
}

// A large catalog arrives: every repository in it is a first clone in
// the urgent lane. A check asked for meanwhile (an on-demand check, a
// webhook), of a mirror or of one of those first clones, goes ahead of
// them; the first clones keep their order.
func TestAskedChecksOvertakeFirstClones(t *testing.T) {
	s, _ := newTest(t, Config{Concurrency: 100})
	for i := range 1000 {
		s.Add(repokey.Key(fmt.Sprintf("new%04d", i)), fmt.Sprint("h", i%7), RepoState{})
	}
	s.Add("mirror", "h0", cloned(t0))
	s.Urgent("new0999")
	s.Urgent("mirror")
	s.Urgent("new0999") // asked again while waiting: keeps its place
	want := []string{"new0999", "mirror", "new0000", "new0001", "new0002"}
	for _, w := range want {
		if key, ok, _ := s.Next(); !ok || key != repokey.Key(w) {
			t.Fatalf("Next() = %q, %v; want %q", key, ok, w)
		}
	}
}

func TestUrgentIsNotCountedAgainstTheBudget(t *testing.T) {
	s, _ := newTest(t, Config{Policy: PolicyFixed, Budget: 1, Concurrency: 1})
	s.Add("bg", "h", cloned(t0.Add(-48*time.Hour)))
	s.Add("hook", "h", cloned(t0))
	key, ok, _ := s.Next() // spends the one token
	if !ok || key != "bg" {
		t.Fatalf("Next() = %q, %v; want the overdue background repository", key, ok)
	}
	s.Done(key, success)
	s.Urgent("hook")
	if key, ok, _ := s.Next(); !ok || key != "hook" {
		t.Errorf("Next() = %q, %v; want the urgent check despite the spent budget", key, ok)
	}
}

func TestUrgentDuringACheckChecksAgainAfterIt(t *testing.T) {
	s, _ := newTest(t, Config{Policy: PolicyFixed, Budget: 10})
	s.Add("a", "h", cloned(t0.Add(-48*time.Hour)))
	key, _, _ := s.Next()
	s.Urgent(key)
	s.Done(key, success)
	if key2, ok, _ := s.Next(); !ok || key2 != key {
		t.Errorf("Next() = %q, %v; want %q again: it was asked for during its check", key2, ok, key)
	}
}

func TestUrgentOverridesRepositoryBackoff(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", RepoState{})
	key, _, _ := s.Next()
	s.Done(key, Outcome{Class: Auth}) // an hour or more of backoff
	if _, ok, _ := s.Next(); ok {
		t.Fatal("a repository in backoff was started")
	}
	s.Urgent("a")
	if key, ok, _ := s.Next(); !ok || key != "a" {
		t.Errorf("Next() = %q, %v; want the repository asked for", key, ok)
	}
}

func TestConcurrencyLimitsRunningChecks(t *testing.T) {
	s, _ := newTest(t, Config{Concurrency: 2})
	for i := range 4 {
		s.Add(repokey.Key(fmt.Sprint(i)), "h", RepoState{})
	}
	a, _, _ := s.Next()
	s.Next()
	if key, ok, wait := s.Next(); ok || wait != 0 {
		t.Fatalf("third Next() = %q, %v, %v; want nothing until a check is done", key, ok, wait)
	}
	s.Done(a, success)
	if _, ok, _ := s.Next(); !ok {
		t.Error("Next() started nothing after a slot was freed")
	}
	if st := s.Stats(); st.Running != 2 {
		t.Errorf("Stats().Running = %d, want 2", st.Running)
	}
}

func TestNextSaysHowLongUntilTheNextDue(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicySourcegraph})
	// Changed 2h ago: sourcegraph checks again in 1h.
	s.Add("a", "h", RepoState{LastCheck: t0, LastChange: t0.Add(-2 * time.Hour), Cloned: true})
	s.Next() // placed somewhere in the first hour
	_, ok, wait := s.Next()
	if ok || wait <= 0 || wait > time.Hour {
		t.Fatalf("Next() = %v, %v; want a wait of at most 1h", ok, wait)
	}
	clk.Advance(wait)
	if _, ok, _ := s.Next(); !ok {
		t.Error("nothing started once the wait was over")
	}
}

func TestBudgetPacesBackgroundChecks(t *testing.T) {
	const budget = 30 // an hour
	s, clk := newTest(t, Config{Policy: PolicyCompass, Budget: budget, Concurrency: 5})
	for i := range 200 {
		s.Add(repokey.Key(fmt.Sprint(i)), "h", RepoState{LastCheck: t0, LastChange: t0.Add(-time.Hour), Cloned: true})
	}
	starts := drive(t, s, clk, t0.Add(4*time.Hour), always(success))
	n := 0
	for _, ts := range starts {
		n += len(ts)
	}
	// A full bucket (Concurrency tokens) at the start, then the pace.
	if lo, hi := 4*budget, 4*budget+5+1; n < lo || n > hi {
		t.Errorf("%d checks in 4h at %d/h, want %d to %d", n, budget, lo, hi)
	}
}

func TestHostLimitPacesOnlyItsHost(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyCompass, HostLimits: map[string]float64{"slow": 6}})
	for i := range 20 {
		s.Add(repokey.Key(fmt.Sprint("s", i)), "slow", cloned(t0))
		s.Add(repokey.Key(fmt.Sprint("f", i)), "fast", cloned(t0))
	}
	starts := drive(t, s, clk, t0.Add(2*time.Hour), always(success))
	perHost := map[byte]int{}
	for k, ts := range starts {
		perHost[k[0]] += len(ts)
	}
	// 6/h holds a minute's worth, at least one token: 1 + 12 in 2h.
	if n := perHost['s']; n < 12 || n > 13 {
		t.Errorf("limited host: %d checks in 2h at 6/h, want 12 or 13", n)
	}
	if n := perHost['f']; n < 20*60 {
		t.Errorf("unlimited host: %d checks in 2h, want its repositories checked every minute (>= %d)", n, 20*60)
	}
}

func TestHostThrottlingBacksOffTheWholeHost(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed, Budget: 1000})
	for i := range 3 {
		s.Add(repokey.Key(fmt.Sprint("a", i)), "a", cloned(t0.Add(-48*time.Hour)))
		s.Add(repokey.Key(fmt.Sprint("b", i)), "b", cloned(t0.Add(-48*time.Hour)))
	}
	var throttled string
	for throttled == "" {
		key, _, _ := s.Next()
		if key[0] == 'a' {
			throttled = string(key)
			s.Done(key, Outcome{Class: Transient, HostThrottled: true})
		} else {
			s.Done(key, success)
		}
	}
	s.Urgent("a1")
	s.Urgent("a2")
	for {
		key, ok, wait := s.Next()
		if !ok {
			if wait <= 0 || wait > hostBase {
				t.Fatalf("Next() waits %v, want at most the first host backoff %v", wait, hostBase)
			}
			break
		}
		if key[0] == 'a' {
			t.Fatalf("Next() = %q: started a repository of a host in backoff", key)
		}
		s.Done(key, success)
	}
	if st := s.Stats(); st.HostsBackingOff != 1 {
		t.Errorf("Stats().HostsBackingOff = %d, want 1", st.HostsBackingOff)
	}
	clk.Advance(hostBase)
	if key, ok, _ := s.Next(); !ok || key[0] != 'a' {
		t.Errorf("Next() = %q, %v after the backoff; want the urgent repository of host a", key, ok)
	}
}

func TestHostBackoffGrowsWithRepeatedThrottling(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed})
	s.Add("a", "h", RepoState{})
	var waits []time.Duration
	for range 4 {
		s.Urgent("a")
		key, ok, wait := s.Next()
		for !ok {
			clk.Advance(wait)
			key, ok, wait = s.Next()
		}
		s.Done(key, Outcome{Class: Transient, HostThrottled: true})
		waits = append(waits, s.hosts["h"].backoffUntil.Sub(clk.Now()))
	}
	for i, w := range waits {
		d := hostBase << i
		if w < d/2 || w > d {
			t.Errorf("throttle %d: host backoff %v, want within [%v, %v]", i+1, w, d/2, d)
		}
	}
	s.Urgent("a")
	for key, ok, wait := s.Next(); ; key, ok, wait = s.Next() {
		if ok {
			s.Done(key, success)
			break
		}
		clk.Advance(wait)
	}
	if n := s.hosts["h"].throttles; n != 0 {
		t.Errorf("after a success the host has %d throttles, want 0", n)
	}
}

func TestMaxIntervalBoundsEveryPolicy(t *testing.T) {
	for _, policy := range []string{PolicyAdaptive, PolicyFixed, PolicyCompass, PolicySourcegraph} {
		t.Run(policy, func(t *testing.T) {
			const maxInterval = 6 * time.Hour
			// Twenty repositories, half of which change every minute:
			// left to themselves, every policy would neglect the others.
			s, clk := newTest(t, Config{Policy: policy, Budget: 40, MaxInterval: maxInterval})
			for i := range 20 {
				s.Add(repokey.Key(fmt.Sprint(i)), "h", RepoState{LastCheck: t0, LastChange: t0.Add(-time.Hour), Cloned: true})
			}
			busy := func(key string, now time.Time) Outcome {
				if key[len(key)-1]%2 == 0 {
					return Outcome{Changed: true, ChangeTimes: []time.Time{now.Add(-time.Minute)}}
				}
				return success
			}
			end := t0.Add(5 * 24 * time.Hour)
			starts := drive(t, s, clk, end, busy)
			for i := range 20 {
				key := fmt.Sprint(i)
				prev := t0
				for _, ts := range append(starts[key], end) {
					// A check due at the bound may wait for a token:
					// allow one token's time.
					if gap := ts.Sub(prev); gap > maxInterval+90*time.Second {
						t.Errorf("%s: %v between checks, want at most %v", key, gap, maxInterval)
					}
					prev = ts
				}
			}
		})
	}
}

func TestRemovedRepositoryIsNotChecked(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", RepoState{})
	s.Add("b", "h", RepoState{})
	s.Remove("a")
	if key, _, _ := s.Next(); key != "b" {
		t.Errorf("Next() = %q, want b", key)
	}
	if n := s.Len(); n != 1 {
		t.Errorf("Len() = %d, want 1", n)
	}
}

func TestRemoveDuringACheckForgetsItAtDone(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", RepoState{})
	key, _, _ := s.Next()
	s.Remove(key)
	if n := s.Len(); n != 0 {
		t.Errorf("Len() = %d after Remove, want 0", n)
	}
	s.Done(key, success)
	if _, found := s.repos[key]; found {
		t.Error("a repository removed during its check is still known after Done")
	}
	if st := s.Stats(); st.Running != 0 || st.Background != 0 {
		t.Errorf("Stats() = %+v, want nothing running or queued", st)
	}
}

func TestDoneForAKeyNotRunningIsIgnored(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", cloned(t0))
	s.Done("a", Outcome{Class: Disk})
	s.Done("unknown", Outcome{Class: Disk})
	if !s.Healthy() || s.Stats().Checks != 0 {
		t.Error("Done for a check that was not started changed the scheduler")
	}
}

func TestAddAgainReplacesTheState(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h1", cloned(t0))
	s.Add("a", "h2", RepoState{})
	if n := s.Len(); n != 1 {
		t.Fatalf("Len() = %d, want 1", n)
	}
	key, ok, _ := s.Next()
	if !ok || key != "a" || s.repos["a"].host.name != "h2" {
		t.Errorf("Next() = %q, %v; want a, now on h2 and urgent (not cloned)", key, ok)
	}
	if st := s.Stats(); st.Background != 0 {
		t.Errorf("Stats().Background = %d, want 0: the repository was queued twice", st.Background)
	}
}

func TestStatsCountsChecksAndQueues(t *testing.T) {
	s, _ := newTest(t, Config{Concurrency: 1})
	s.Add("a", "h", RepoState{})
	s.Add("b", "h", RepoState{})
	s.Add("c", "h", cloned(t0))
	key, _, _ := s.Next()
	s.Done(key, Outcome{Changed: true, Fetched: true})
	key, _, _ = s.Next()
	s.Done(key, Outcome{Class: Transient})
	st := s.Stats()
	want := Stats{Checks: 2, Fetches: 1, Changed: 1, Failures: map[FailureClass]int{Transient: 1}, Background: 3, Healthy: true}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Errorf("Stats() = %+v\nwant      %+v", st, want)
	}
}

func TestSameSeedSameSchedule(t *testing.T) {
	run := func() string {
		s, clk := newTest(t, Config{Budget: 100, Seed: 7})
		for i := range 50 {
			s.Add(repokey.Key(fmt.Sprint(i)), fmt.Sprint("h", i%3), RepoState{LastCheck: t0, LastChange: t0.Add(-time.Duration(i) * time.Hour), Cloned: true})
		}
		starts := drive(t, s, clk, t0.Add(24*time.Hour), func(key string, now time.Time) Outcome {
			if len(key) == 1 {
				return Outcome{Class: Transient}
			}
			return success
		})
		return fmt.Sprint(starts)
	}
	if a, b := run(), run(); a != b {
		t.Error("two schedulers with the same seed and inputs made different schedules")
	}
}

// The overdue backlog is what is due and not started, not the whole
// queue; the part of it past MaxInterval is counted on its own.
func TestStatsCountTheOverdueBacklog(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed, MinInterval: time.Hour, MaxInterval: 2 * time.Hour})
	for i := range 20 {
		s.Add(repokey.Key(fmt.Sprintf("stale-%d", i)), "h", cloned(t0.Add(-3*time.Hour))) // due, past MaxInterval
		s.Add(repokey.Key(fmt.Sprintf("fresh-%d", i)), "h", cloned(t0))                   // due within the hour
	}
	check := func(what string, background, overdue, past int) {
		t.Helper()
		st := s.Stats()
		if st.Background != background || st.Overdue != overdue || st.PastMaxInterval != past {
			t.Errorf("%s: background %d, overdue %d, past max interval %d; want %d, %d, %d",
				what, st.Background, st.Overdue, st.PastMaxInterval, background, overdue, past)
		}
	}
	check("at the start", 40, 20, 20)
	clk.Advance(time.Hour)
	check("an hour later", 40, 40, 20)
	clk.Advance(time.Hour + time.Second)
	check("past every deadline", 40, 40, 40)
	key, ok, _ := s.Next()
	if !ok {
		t.Fatal("nothing due")
	}
	check("one running", 39, 39, 39)
	s.Done(key, success)
	check("one checked", 40, 39, 39)
}

// A throttling host's Retry-After is honoured beyond the backoff's cap of
// an hour, up to MaxRetryAfter; it lengthens a backoff, never shortens it.
func TestRetryAfterIsHonouredUpToItsBound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		want       time.Duration // the host's wait, at least
		most       time.Duration
	}{
		{"three hours", 3 * time.Hour, 3 * time.Hour, 3 * time.Hour},
		{"two days, bounded", 48 * time.Hour, MaxRetryAfter, MaxRetryAfter},
		{"ten seconds, the backoff is longer", 10 * time.Second, hostBase / 2, hostBase},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newTest(t, Config{Policy: PolicyFixed})
			s.Add("a", "h", RepoState{})
			s.Add("b", "h", RepoState{})
			key, _, _ := s.Next()
			s.Done(key, Outcome{Class: Transient, HostThrottled: true, RetryAfter: tc.retryAfter})
			if w := s.hosts["h"].backoffUntil.Sub(clk.Now()); w < tc.want || w > tc.most {
				t.Errorf("host waits %v, want within [%v, %v]", w, tc.want, tc.most)
			}
			other := "b"
			if key == "b" {
				other = "a"
			}
			clk.Advance(tc.want - time.Second)
			s.Urgent(repokey.Key(other))
			if k, ok, _ := s.Next(); ok {
				t.Errorf("%s started %v before the host's wait ended", k, time.Second)
			}
			clk.Advance(tc.most - tc.want + time.Second)
			if k, ok, _ := s.Next(); !ok || k != repokey.Key(other) {
				t.Errorf("Next() = %q, %v after the wait; want %s", k, ok, other)
			}
		})
	}
}
