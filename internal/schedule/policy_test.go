package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestCompassStepFollowsTheSeedRule(t *testing.T) {
	step := math.Cbrt(2592000) // cbrt(STEP_SECONDS)
	now := t0
	tests := []struct {
		name string
		r    repo
		want float64
	}{
		{"not cloned", repo{}, step},
		{"not cloned, 2 clone failures", repo{fails: 2}, 3 * step},
		{"no last commit", repo{cloned: true}, step},
		{"no last commit, 1 fetch failure", repo{cloned: true, fails: 1}, 2 * step},
		{"last commit in the future", repo{cloned: true, lastChange: now.Add(time.Hour)}, step},
		{"last commit now", repo{cloned: true, lastChange: now}, step},
		{"last commit 1000s ago", repo{cloned: true, lastChange: now.Add(-1000 * time.Second)}, 10},
		{"last commit 8 days ago", repo{cloned: true, lastChange: now.Add(-8 * 24 * time.Hour)}, math.Cbrt(8 * 86400)},
		{"fetch failures do not count with a last commit", repo{cloned: true, fails: 3, lastChange: now.Add(-27 * time.Second)}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (compass{}).step(&tt.r, now); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("step = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompassChecksTheSmallestPriorityAndAddsTheStep(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyCompass, Concurrency: 1})
	// Added with priority 0 + step: cbrt of 1000s, 8000s, 27000s.
	for key, ago := range map[string]time.Duration{"a": 1000 * time.Second, "b": 8000 * time.Second, "c": 27000 * time.Second} {
		s.Add(repokey.Key(key), "h", RepoState{LastCheck: t0, LastChange: t0.Add(-ago), Cloned: true})
	}
	var order []string
	for range 6 {
		key, _, _ := s.Next()
		order = append(order, fmt.Sprintf("%s:%.0f", key, s.repos[key].rank))
		s.Done(key, success)
		clk.Advance(time.Minute) // MinInterval: everyone is ready again
	}
	// a: 10 -> 20; b (older at a tie): 20 -> 40; a: 20 -> 30.4;
	// c: 30 -> 60; a: 30.4 -> 41.1; b: 40.
	want := "[a:10 b:20 a:20 c:30 a:30 b:40]"
	if got := fmt.Sprint(order); got != want {
		t.Errorf("checks (key:priority before the check) = %s, want %s", got, want)
	}
}

func TestSourcegraphInterval(t *testing.T) {
	tests := []struct {
		sinceChange time.Duration // 0: no known change
		want        time.Duration
	}{
		{10 * time.Second, 45 * time.Second},
		{2 * time.Hour, time.Hour},
		{10 * time.Hour, 5 * time.Hour},
		{30 * time.Hour, 8 * time.Hour},
		{0, 8 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.sinceChange.String(), func(t *testing.T) {
			r := repo{cloned: true}
			if tt.sinceChange > 0 {
				r.lastChange = t0.Add(-tt.sinceChange)
			}
			if got := (sourcegraph{}).next(&r, t0, success).Sub(t0); got != tt.want {
				t.Errorf("next check in %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSourcegraphDoublesTheIntervalAfterAnError(t *testing.T) {
	r := repo{cloned: true, lastChange: t0.Add(-2 * time.Hour)}
	p := sourcegraph{}
	p.next(&r, t0, success) // 1h
	for _, want := range []time.Duration{2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 16 * time.Hour, 16 * time.Hour} {
		if got := p.next(&r, t0, Outcome{Class: Transient}).Sub(t0); got != want {
			t.Errorf("after an error: next in %v, want %v", got, want)
		}
	}
}

func TestFixedSpendsTheBudgetEvenly(t *testing.T) {
	tests := []struct {
		repos  int
		budget float64
		want   time.Duration
	}{
		{24, 24, time.Hour},
		{100, 50, 2 * time.Hour},
		{3, 1.5, 2 * time.Hour},
		{7 * 24, 7, 24 * time.Hour},
		{48, 24 * 60, 2 * time.Minute},
		{10, 0, time.Minute},           // no budget: MinInterval
		{48, 24 * 60 * 4, time.Minute}, // never under MinInterval
		{1000, 1, 24 * time.Hour},      // never over MaxInterval
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d repos at %v/h", tt.repos, tt.budget), func(t *testing.T) {
			s, _ := newTest(t, Config{Policy: PolicyFixed, Budget: tt.budget})
			for i := range tt.repos {
				s.Add(repokey.Key(fmt.Sprint(i)), "h", cloned(t0))
			}
			if got := (fixed{s}).interval(); got != tt.want {
				t.Errorf("interval = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFixedChecksRoundRobin(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed, Budget: 4})
	for i := range 8 {
		s.Add(repokey.Key(fmt.Sprint(i)), "h", cloned(t0))
	}
	starts := drive(t, s, clk, t0.Add(24*time.Hour), always(success))
	for key, ts := range starts {
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap < 110*time.Minute || gap > 130*time.Minute {
				t.Errorf("%s: %v between checks, want about 2h (8 repositories at 4/h)", key, gap)
			}
		}
		if n := len(ts); n < 11 || n > 13 {
			t.Errorf("%s: %d checks in a day, want 12", key, n)
		}
	}
}

// changesAt returns an outcome function for repositories whose upstream
// changes at the times that changes(key, from, to) lists in (from, to].
func changesAt(changes func(key string, from, to time.Time) []time.Time) func(string, time.Time) Outcome {
	last := map[string]time.Time{}
	return func(key string, now time.Time) Outcome {
		from, ok := last[key]
		if !ok {
			from = t0
		}
		last[key] = now
		cs := changes(key, from, now)
		return Outcome{Changed: len(cs) > 0, ChangeTimes: cs, Fetched: len(cs) > 0}
	}
}

// every returns the multiples of period after offset in (from, to].
func every(period, offset time.Duration, from, to time.Time) []time.Time {
	var out []time.Time
	t := from.Truncate(period).Add(offset)
	for ; !t.After(to); t = t.Add(period) {
		if t.After(from) {
			out = append(out, t)
		}
	}
	return out
}

func TestAdaptiveChecksWhereChecksBuyFreshness(t *testing.T) {
	// Four repositories: one that never changes, one that changes twice a
	// day, one every 3 days, and one every 10 minutes. At 6 checks a day,
	// the one changing every 10 minutes cannot be kept fresh and the one
	// that never changes needs no checks: the other two get most.
	s, clk := newTest(t, Config{Budget: 0.25, MaxInterval: 7 * 24 * time.Hour})
	periods := map[string]time.Duration{"never": 0, "daily2": 12 * time.Hour, "3days": 72 * time.Hour, "10min": 10 * time.Minute}
	history := func(p time.Duration) []time.Time {
		if p == 0 {
			return nil
		}
		return every(p, 7*time.Minute, t0.Add(-30*24*time.Hour), t0)
	}
	for key, p := range periods {
		s.Add(repokey.Key(key), "h", RepoState{LastCheck: t0, ChangeTimes: history(p), Cloned: true})
	}
	starts := drive(t, s, clk, t0.Add(14*24*time.Hour), changesAt(func(key string, from, to time.Time) []time.Time {
		if p := periods[key]; p > 0 {
			return every(p, 7*time.Minute, from, to)
		}
		return nil
	}))
	n := func(key string) int { return len(starts[key]) }
	if n("daily2") <= n("never") || n("3days") <= n("never") {
		t.Errorf("checks in 14 days: %v; want more for the repositories that change now and then than for the one that never does", counts(starts))
	}
	if n("daily2") <= n("10min") {
		t.Errorf("checks in 14 days: %v; want more for the one changing twice a day than for the one changing every 10 minutes", counts(starts))
	}
	if total := n("never") + n("daily2") + n("3days") + n("10min"); total > 14*6+10 {
		t.Errorf("%d checks in 14 days at 6 a day: over the budget", total)
	}
}

func counts(starts map[string][]time.Time) map[string]int {
	out := map[string]int{}
	for k, ts := range starts {
		out[k] = len(ts)
	}
	return out
}

func TestAdaptiveChecksAfterTheWorkingDay(t *testing.T) {
	// The repository changes every weekday at 10:00, 13:00 and 16:00 UTC;
	// the budget allows about one check a day for it. Checked right after
	// 16:00 it stays fresh until 10:00 the next day.
	s, clk := newTest(t, Config{Budget: 2.0 / 24, MaxInterval: 7 * 24 * time.Hour})
	workday := func(from, to time.Time) []time.Time {
		var out []time.Time
		for _, t := range every(time.Hour, 0, from, to) {
			if h := t.Hour(); (h == 10 || h == 13 || h == 16) && t.Weekday() != time.Saturday && t.Weekday() != time.Sunday {
				out = append(out, t)
			}
		}
		return out
	}
	s.Add("office", "h", RepoState{LastCheck: t0, ChangeTimes: workday(t0.Add(-60*24*time.Hour), t0), Cloned: true})
	s.Add("quiet", "h", RepoState{LastCheck: t0, ChangeTimes: every(20*24*time.Hour, 0, t0.Add(-60*24*time.Hour), t0), Cloned: true})
	starts := drive(t, s, clk, t0.Add(14*24*time.Hour), changesAt(func(key string, from, to time.Time) []time.Time {
		if key == "office" {
			return workday(from, to)
		}
		return nil
	}))
	after := 0
	for _, ts := range starts["office"] {
		if h := ts.Hour(); h >= 16 {
			after++
		}
	}
	if n := len(starts["office"]); n == 0 || after < n*3/4 {
		t.Errorf("%d of %d checks of the office-hours repository after 16:00 UTC, want most: %v", after, n, starts["office"])
	}
}

func TestAdaptiveSpendsTheBudget(t *testing.T) {
	// 50 repositories changing as Poisson processes at rates from once a
	// week to 20 times a day: every check is worth something somewhere.
	const repos, perDay, days = 50, 2, 20
	s, clk := newTest(t, Config{Budget: repos * perDay / 24.0, MaxInterval: 7 * 24 * time.Hour})
	rng := rand.New(rand.NewPCG(1, 2))
	changes := map[string][]time.Time{}
	for i := range repos {
		key := fmt.Sprint(i)
		mean := time.Duration(float64(7*24*time.Hour) / math.Pow(140, float64(i)/repos))
		for c := t0.Add(-30 * 24 * time.Hour); c.Before(t0.Add(days * 24 * time.Hour)); c = c.Add(time.Duration(rng.ExpFloat64() * float64(mean))) {
			changes[key] = append(changes[key], c)
		}
		var history []time.Time
		for _, c := range changes[key] {
			if c.Before(t0) {
				history = append(history, c)
			}
		}
		s.Add(repokey.Key(key), "h", RepoState{LastCheck: t0, ChangeTimes: history, Cloned: true})
	}
	starts := drive(t, s, clk, t0.Add(days*24*time.Hour), changesAt(func(key string, from, to time.Time) []time.Time {
		var out []time.Time
		for _, c := range changes[key] {
			if c.After(from) && !c.After(to) {
				out = append(out, c)
			}
		}
		return out
	}))
	total := 0
	for _, ts := range starts {
		total += len(ts)
	}
	if want := repos * perDay * days; total < want*95/100 || total > want+10 {
		t.Errorf("%d checks in %d days, want about %d", total, days, want)
	}
}
