package schedule

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/hours"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

func window(t *testing.T, s string) *hours.Window {
	t.Helper()
	w, err := hours.Parse(s, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestBackgroundChecksRunOnlyInTheActiveHours drives two days of the fake
// clock: every background check starts within 01:00-07:00, and the
// scheduler's wait outside them ends when they begin.
func TestBackgroundChecksRunOnlyInTheActiveHours(t *testing.T) {
	w := window(t, "01:00-07:00")
	s, clk := newTest(t, Config{Policy: PolicyFixed, MinInterval: 10 * time.Minute, MaxInterval: time.Hour, Hours: w})
	for _, k := range []string{"h/a", "h/b", "h/c"} {
		s.Add(repokey.Key(k), "h", cloned(t0))
	}
	// t0 is midnight: resting, nothing starts, and the wait is until 01:00.
	if key, ok, wait := s.Next(); ok || wait != time.Hour {
		t.Fatalf("at 00:00: Next() = %q, %v, %v; want nothing until 01:00", key, ok, wait)
	}
	starts := drive(t, s, clk, t0.Add(48*time.Hour), always(success))
	total := 0
	for k, ts := range starts {
		for _, at := range ts {
			if !w.Active(at) {
				t.Errorf("%s checked at %s, outside the active hours", k, at.Format("Jan 2 15:04"))
			}
		}
		total += len(ts)
	}
	// Six hours a day, one check of each every 10 minutes to an hour:
	// at least one an hour, each, both days.
	if total < 2*6*3 {
		t.Fatalf("%d checks in two days' active hours; want at least %d", total, 2*6*3)
	}
}

// TestUrgentChecksRunOutsideTheActiveHoursUnlessDeclined: a first clone
// and a check asked for start at once outside the hours; a volunteer who
// declines them has them start when the hours begin.
func TestUrgentChecksRunOutsideTheActiveHoursUnlessDeclined(t *testing.T) {
	for _, decline := range []bool{false, true} {
		s, clk := newTest(t, Config{Hours: window(t, "22:00-06:00"), DeclineUrgent: decline})
		clk.Set(t0.Add(12 * time.Hour))  // noon: resting
		s.Add("h/new", "h", RepoState{}) // a first clone
		s.Add("h/old", "h", cloned(t0))
		s.Urgent("h/old") // a check asked for
		key, ok, wait := s.Next()
		if !decline {
			if !ok || key != "h/old" {
				t.Fatalf("outside the hours: Next() = %q, %v; want the check asked for", key, ok)
			}
			if key, ok, _ = s.Next(); !ok || key != "h/new" {
				t.Fatalf("outside the hours: Next() = %q, %v; want the first clone", key, ok)
			}
			continue
		}
		if ok || wait != 10*time.Hour {
			t.Fatalf("declined outside the hours: Next() = %q, %v, %v; want nothing until 22:00", key, ok, wait)
		}
		clk.Advance(wait)
		if key, ok, _ = s.Next(); !ok || key != "h/old" {
			t.Fatalf("at 22:00: Next() = %q, %v; want the check asked for", key, ok)
		}
	}
}
