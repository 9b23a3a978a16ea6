package hours

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones of the DST cases, whatever the machine has
)

func mustParse(t *testing.T, s string, loc *time.Location) *Window {
	t.Helper()
	w, err := Parse(s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestParseSaysWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ in, says string }{
		{"01:00", "want HH:MM-HH:MM"},
		{"1-7", `"1" is not HH:MM`},
		{"01:00-", `"" is not HH:MM`},
		{"25:00-07:00", "not a time of day"},
		{"01:60-07:00", "not a time of day"},
		{"24:00-07:00", "not a time of day"},
		{"01:00-24:01", "not a time of day"},
		{"aa:bb-07:00", "is not HH:MM"},
		{"01:00-07:00-09:00", "is not HH:MM"},
		{"05:00-05:00", "the same time"},
		{"00:00-24:00", "the same time"},
	} {
		_, err := Parse(c.in, time.UTC)
		if err == nil || !strings.Contains(err.Error(), c.says) || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), c.in) {
			t.Errorf("Parse(%q) = %v; want an error naming it that says %q", c.in, err, c.says)
		}
	}
	if w, err := Parse("", time.UTC); w != nil || err != nil {
		t.Errorf(`Parse("") = %v, %v; want no window`, w, err)
	}
	if w := mustParse(t, " 22:00-06:00 ", time.UTC); w.String() != "22:00-06:00" {
		t.Errorf("String() = %q", w.String())
	}
}

func TestNoWindowIsAlwaysActive(t *testing.T) {
	var w *Window
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if !w.Active(now) || !w.Opens(now).Equal(now) || w.String() != "" {
		t.Fatal("a nil window is always active")
	}
}

func TestActiveAndOpens(t *testing.T) {
	utc := func(d, h, m int) time.Time { return time.Date(2026, 5, d, h, m, 0, 0, time.UTC) }
	for _, c := range []struct {
		window string
		at     time.Time
		active bool
		opens  time.Time
	}{
		{"01:00-07:00", utc(1, 0, 59), false, utc(1, 1, 0)},
		{"01:00-07:00", utc(1, 1, 0), true, utc(1, 1, 0)},
		{"01:00-07:00", utc(1, 6, 59), true, utc(1, 6, 59)},
		{"01:00-07:00", utc(1, 7, 0), false, utc(2, 1, 0)},
		{"01:00-07:00", utc(1, 23, 30), false, utc(2, 1, 0)},
		// Wrapping past midnight.
		{"22:00-06:00", utc(1, 21, 59), false, utc(1, 22, 0)},
		{"22:00-06:00", utc(1, 22, 0), true, utc(1, 22, 0)},
		{"22:00-06:00", utc(1, 23, 59), true, utc(1, 23, 59)},
		{"22:00-06:00", utc(2, 0, 0), true, utc(2, 0, 0)},
		{"22:00-06:00", utc(2, 5, 59), true, utc(2, 5, 59)},
		{"22:00-06:00", utc(2, 6, 0), false, utc(2, 22, 0)},
		{"22:00-06:00", utc(2, 12, 0), false, utc(2, 22, 0)},
		// An end at midnight.
		{"18:00-24:00", utc(1, 23, 59), true, utc(1, 23, 59)},
		{"18:00-24:00", utc(2, 0, 0), false, utc(2, 18, 0)},
	} {
		w := mustParse(t, c.window, time.UTC)
		if got := w.Active(c.at); got != c.active {
			t.Errorf("%s at %s: active %v, want %v", c.window, c.at.Format("Jan 2 15:04"), got, c.active)
		}
		if got := w.Opens(c.at); !got.Equal(c.opens) {
			t.Errorf("%s at %s: opens %s, want %s", c.window, c.at.Format("Jan 2 15:04"), got.Format("Jan 2 15:04"), c.opens.Format("Jan 2 15:04"))
		}
	}
}

// TestTheWindowIsOfTheWallClockAcrossDST: New York's clocks jump from
// 02:00 EST to 03:00 EDT on March 8, 2026 and fall back from 02:00 EDT to
// 01:00 EST on November 1.
func TestTheWindowIsOfTheWallClockAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { // a UTC instant
		u, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, c := range []struct {
		what, window string
		at           time.Time
		active       bool
		opens        time.Time
	}{
		{"the jump skips the whole window: it does not open that day", "02:00-03:00",
			at("2026-03-08T06:30:00Z") /* 01:30 EST */, false, at("2026-03-09T06:00:00Z") /* 02:00 EDT the next day */},
		{"the jump lands in the window: it opens at the jump", "02:30-07:00",
			at("2026-03-08T06:30:00Z") /* 01:30 EST */, false, at("2026-03-08T07:00:00Z") /* 03:00 EDT */},
		{"a window that the jump cuts short is active before it", "01:30-02:30",
			at("2026-03-08T06:45:00Z") /* 01:45 EST */, true, at("2026-03-08T06:45:00Z")},
		{"and closed after it", "01:30-02:30",
			at("2026-03-08T07:00:00Z") /* 03:00 EDT */, false, at("2026-03-09T05:30:00Z") /* 01:30 EDT */},
		{"the repeated hour is in the window the first time", "01:00-02:00",
			at("2026-11-01T05:30:00Z") /* 01:30 EDT */, true, at("2026-11-01T05:30:00Z")},
		{"and the second time", "01:00-02:00",
			at("2026-11-01T06:30:00Z") /* 01:30 EST */, true, at("2026-11-01T06:30:00Z")},
		{"and closes after it", "01:00-02:00",
			at("2026-11-01T07:00:00Z") /* 02:00 EST */, false, at("2026-11-02T06:00:00Z") /* 01:00 EST */},
		{"a window that ended in the first pass opens again when the clock falls back", "22:00-01:30",
			at("2026-11-01T05:40:00Z") /* 01:40 EDT */, false, at("2026-11-01T06:00:00Z") /* 01:00 EST */},
		{"an ordinary day opens at its start in the zone", "01:00-07:00",
			at("2026-06-01T04:00:00Z") /* 00:00 EDT */, false, at("2026-06-01T05:00:00Z") /* 01:00 EDT */},
	} {
		w := mustParse(t, c.window, ny)
		if got := w.Active(c.at); got != c.active {
			t.Errorf("%s (%s at %s): active %v, want %v", c.what, c.window, c.at.In(ny).Format("Jan 2 15:04 MST"), got, c.active)
		}
		if got := w.Opens(c.at); !got.Equal(c.opens) {
			t.Errorf("%s (%s at %s): opens %s, want %s", c.what, c.window, c.at.In(ny).Format("Jan 2 15:04 MST"),
				got.In(ny).Format("Jan 2 15:04 MST"), c.opens.In(ny).Format("Jan 2 15:04 MST"))
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"01:00-07:00", "22:00-06:00", "18:00-24:00", "1-7", "", "05:00-05:00"} {
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, s string, unix int64) {
		w, err := Parse(s, time.UTC)
		if err != nil || w == nil {
			return
		}
		back, err := Parse(w.String(), time.UTC)
		if err != nil || *back != *w {
			t.Fatalf("Parse(%q) = %s, which does not read back: %v", s, w, err)
		}
		now := time.Unix(unix%(1<<40), 0)
		o := w.Opens(now)
		if o.Before(now) || !w.Active(o) || o.Sub(now) > 24*time.Hour {
			t.Fatalf("%s at %s opens at %s", w, now, o)
		}
	})
}
