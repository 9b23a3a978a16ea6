// Package hours is a volunteer's active hours (--active-hours 01:00-07:00):
// a daily window of wall-clock time in the node's time zone, outside which
// the node does no background work. It is pure: it reads no clock, and
// answers for the times it is given (the injected clock's, in the
// scheduler and the node's loops).
//
// The window is of the wall clock: on the day a zone's clocks jump, it
// opens and closes when the clock on the wall reads its bounds. A window
// that the spring's jump skips does not open that day; the hour that
// autumn repeats is in the window twice.
package hours

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// day is the minutes of a day.
const day = 24 * 60

// Window is a daily span of wall-clock time in a zone, from its start
// (included) to its end (excluded); it wraps past midnight when the end
// comes first. A nil *Window is always active.
type Window struct {
	start, end int // minutes since midnight; end may be 24:00
	loc        *time.Location
}

// ErrSyntax is what Parse's errors wrap when the text is not a window.
var ErrSyntax = errors.New("not a window of hours")

// Parse reads a window, "HH:MM-HH:MM" in the zone loc (nil: time.Local),
// such as 01:00-07:00 or 22:00-06:00 (wrapping past midnight). The end may
// be 24:00. "" is no window: always active (nil).
func Parse(s string, loc *time.Location) (*Window, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if loc == nil {
		loc = time.Local
	}
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return nil, fmt.Errorf("active hours %q: %w: want HH:MM-HH:MM, e.g. 01:00-07:00", s, ErrSyntax)
	}
	start, err := clockTime(from, false)
	if err != nil {
		return nil, fmt.Errorf("active hours %q: start: %w", s, err)
	}
	end, err := clockTime(to, true)
	if err != nil {
		return nil, fmt.Errorf("active hours %q: end: %w", s, err)
	}
	if start == end%day {
		return nil, fmt.Errorf("active hours %q: %w: the start and the end are the same time; to be active all day, leave the active hours unset", s, ErrSyntax)
	}
	return &Window{start: start, end: end, loc: loc}, nil
}

// clockTime reads "HH:MM" as minutes since midnight; 24:00 only if
// allowed (an end).
func clockTime(s string, end bool) (int, error) {
	hh, mm, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || len(hh) != 2 || len(mm) != 2 {
		return 0, fmt.Errorf("%w: %q is not HH:MM", ErrSyntax, s)
	}
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	switch {
	case err1 != nil || err2 != nil || h < 0 || m < 0:
		return 0, fmt.Errorf("%w: %q is not HH:MM", ErrSyntax, s)
	case end && h == 24 && m == 0:
		return day, nil
	case h > 23 || m > 59:
		return 0, fmt.Errorf("%w: %q is not a time of day (00:00 to 23:59)", ErrSyntax, s)
	}
	return h*60 + m, nil
}

// String writes the window as Parse reads it ("" for nil).
func (w *Window) String() string {
	if w == nil {
		return ""
	}
	return fmt.Sprintf("%02d:%02d-%02d:%02d", w.start/60, w.start%60, w.end/60, w.end%60)
}

// Location is the window's zone (nil for nil).
func (w *Window) Location() *time.Location {
	if w == nil {
		return nil
	}
	return w.loc
}

// Active reports whether t is in the window: whether the wall clock of
// the window's zone reads a time in it at t.
func (w *Window) Active(t time.Time) bool {
	if w == nil {
		return true
	}
	lt := t.In(w.loc)
	m := lt.Hour()*60 + lt.Minute()
	if w.start < w.end {
		return m >= w.start && m < w.end
	}
	return m >= w.start || m < w.end
}

// Opens returns the first instant from t on at which the window is active:
// t itself if it is active at t. It follows the zone's offset from one
// change to the next, so that a window opens when the wall clock reads its
// start, or when a jump of the clock lands in it.
func (w *Window) Opens(t time.Time) time.Time {
	if w.Active(t) {
		return t
	}
	u := t.In(w.loc)
	// Two days hold at most a few changes of offset; a window is open
	// somewhere in any three days of any zone.
	for range 8 {
		_, off := u.Zone()
		_, next := u.ZoneBounds()
		// Within one offset the wall clock runs with UTC: find the next
		// time it reads the start.
		shift := time.Duration(off) * time.Second
		wall := u.UTC().Add(shift)
		midnight := time.Date(wall.Year(), wall.Month(), wall.Day(), 0, 0, 0, 0, time.UTC)
		at := midnight.Add(time.Duration(w.start) * time.Minute)
		if at.Before(wall) {
			at = at.Add(24 * time.Hour)
		}
		open := at.Add(-shift).In(w.loc)
		if next.IsZero() || open.Before(next) {
			return open
		}
		u = next.In(w.loc) // the clock jumps here: it may jump into the window
		if w.Active(u) {
			return u
		}
	}
	return time.Time{}
}
