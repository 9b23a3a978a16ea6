package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// An archived repository is checked once per ArchivedInterval, the others
// of its host as before; an urgent check still comes at once; and when
// the forge unarchives it, it returns to its normal checks within its
// interval.
func TestAnArchivedRepositoryIsCheckedOncePerArchivedInterval(t *testing.T) {
	cfg := Config{MaxInterval: aDay, MinInterval: time.Hour, ArchivedInterval: 30 * aDay}
	s, clk := newTest(t, cfg)
	for i := range 4 {
		s.Add(repokey.Key(fmt.Sprintf("h/%d", i)), "h", RepoState{LastCheck: t0, ChangeTimes: pastChanges(i), Cloned: true})
	}
	s.SetArchived("h/0", true)
	s.SetArchived("h/unknown", true) // ignored
	outcome := changing()
	quiet := func(key string, now time.Time) Outcome {
		if key == "h/0" {
			return Outcome{} // read-only: nothing changes
		}
		return outcome(key, now)
	}
	starts := drive(t, s, clk, t0.Add(65*aDay), quiet)
	// The first check is spread over the interval from the last (t0), as
	// every first background check is; the next ones are an interval apart.
	ts := starts["h/0"]
	if len(ts) < 2 || len(ts) > 3 || ts[0].Sub(t0) > cfg.ArchivedInterval {
		t.Fatalf("the archived repository was checked at %v, want once within 30 days, then every 30 days", since(ts))
	}
	for j := 1; j < len(ts); j++ {
		if gap := ts[j].Sub(ts[j-1]); gap != cfg.ArchivedInterval {
			t.Fatalf("the archived repository was checked %v apart (at %v), want 30 days", gap, since(ts))
		}
	}
	for i := 1; i < 4; i++ {
		key := fmt.Sprintf("h/%d", i)
		if n := len(starts[key]); n < 65 {
			t.Errorf("%s was checked %d times in 65 days, want one a day at least", key, n)
		}
	}

	// An urgent check comes at once, archived or not.
	s.Urgent("h/0")
	urgent := drive(t, s, clk, clk.Now().Add(time.Minute), quiet)
	if len(urgent["h/0"]) != 1 {
		t.Fatalf("an urgent check of the archived repository ran %d times, want once", len(urgent["h/0"]))
	}

	// Unarchived: within MaxInterval from now, then as any other.
	un := clk.Now()
	s.SetArchived("h/0", false)
	after := drive(t, s, clk, un.Add(5*aDay), quiet)["h/0"]
	if len(after) < 4 || after[0].Sub(un) > cfg.MaxInterval {
		t.Fatalf("after it was unarchived it was checked at %v (from then), want within a day and daily", sinceOf(un, after))
	}
}

func TestAnArchivedIntervalShorterThanTheMaxIntervalIsRefused(t *testing.T) {
	if _, err := New(Config{MaxInterval: 40 * aDay, ArchivedInterval: 30 * aDay}, clock.NewFake(t0)); err == nil {
		t.Fatal("an archived interval shorter than the max interval was accepted")
	}
	c, err := Config{MaxInterval: 40 * aDay}.withDefaults()
	if err != nil || c.ArchivedInterval != 40*aDay {
		t.Fatalf("default archived interval with a 40-day max interval: %v, %v; want 40 days", c.ArchivedInterval, err)
	}
}

func since(ts []time.Time) []time.Duration { return sinceOf(t0, ts) }

func sinceOf(base time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, x := range ts {
		out[i] = x.Sub(base)
	}
	return out
}
