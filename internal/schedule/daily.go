package schedule

import (
	"math"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule/freshness"
)

const daySeconds = 86400.0

// day is a repository's change model over one day: an hour-of-day profile
// times a rate, a Poisson process within each hour. It values the daily
// schedules the adaptive policy chooses from.
type day struct {
	l     [24]float64     // changes a second, by hour of day (UTC)
	fresh [24][25]float64 // fresh[h][n]: expected fresh seconds in the n hours after a check at hour h
	stay  float64         // probability of no change in a whole day
}

func newDay(rate float64, prof *[24]float64) *day {
	d := &day{stay: 1}
	var e, a [24]float64
	for h, f := range prof {
		d.l[h] = rate * f
		li := d.l[h] * 3600
		e[h] = math.Exp(-li)
		a[h] = 3600
		if li > 1e-9 {
			a[h] = 3600 * -math.Expm1(-li) / li
		}
		d.stay *= e[h]
	}
	for h := range 24 {
		s := 1.0
		for n := range 24 {
			w := (h + n) % 24
			d.fresh[h][n+1] = d.fresh[h][n] + s*a[w]
			s *= e[w]
		}
	}
	return d
}

// dailySchedule is a schedule that repeats every day: every `every` at
// hours[0], or at hours[:k] each day, or every interval.
type dailySchedule struct {
	every    time.Duration
	k        int
	interval time.Duration
	hours    [24]int
}

// footprint is how many checks a day a schedule makes at each hour of the
// day: perDay at each hour of mask.
type footprint struct {
	mask   uint32
	perDay float64
}

func evenly(every time.Duration) footprint {
	return footprint{mask: 1<<24 - 1, perDay: daySeconds / every.Seconds() / 24}
}

func (f footprint) add(demand *[24]float64, sign float64) {
	for h := range demand {
		if f.mask&(1<<h) != 0 {
			demand[h] += sign * f.perDay
		}
	}
}

func (s dailySchedule) footprint() footprint {
	switch {
	case s.every > 0:
		return footprint{mask: 1 << s.hours[0], perDay: 24 * time.Hour.Seconds() / s.every.Seconds()}
	case s.k > 0:
		var m uint32
		for _, h := range s.hours[:s.k] {
			m |= 1 << h
		}
		return footprint{mask: m, perDay: 1}
	}
	return evenly(s.interval)
}

// choose returns the daily schedule with the most fresh seconds a day less
// mu for each check, every gap between checks in [lo, hi].
func (d *day) choose(mu float64, lo, hi time.Duration, intervals []time.Duration) dailySchedule {
	var best dailySchedule
	bestValue := math.Inf(-1)
	consider := func(c dailySchedule, value float64) {
		if value > bestValue {
			best, bestValue = c, value
		}
	}

	first := 0
	for h := range 24 {
		if d.fresh[h][24] > d.fresh[first][24] {
			first = h
		}
	}

	// Every n days at the hour after which the mirror stays fresh longest.
	for n := 1; n <= 7; n++ {
		every := time.Duration(n) * 24 * time.Hour
		if every < lo || every > hi {
			continue
		}
		days := float64(n) // sum of stay^i, i < n: a change on any day is caught at the end
		if d.stay < 1-1e-12 {
			days = (1 - math.Pow(d.stay, float64(n))) / (1 - d.stay)
		}
		c := dailySchedule{every: every}
		c.hours[0] = first
		consider(c, (d.fresh[first][24]*days-mu)/float64(n))
	}

	// k hours a day, added one by one where they gain most.
	if hi >= time.Hour && lo <= 12*time.Hour {
		var in [24]bool
		c := dailySchedule{k: 1}
		value := d.fresh[first][24] - mu
		in[first] = true
		c.hours[0] = first
		for k := 2; k <= 24; k++ {
			add, gain := -1, math.Inf(-1)
			for h := range 24 {
				if in[h] {
					continue
				}
				a, b := around(&in, h)
				g := d.fresh[a][gap(a, h)] + d.fresh[h][gap(h, b)] - d.fresh[a][gap(a, b)] - mu
				if g > gain {
					add, gain = h, g
				}
			}
			in[add] = true
			value += gain
			c.hours[k-1] = add
			c.k = k
			if shortest, longest := gaps(&in); longest <= hi && shortest >= lo {
				consider(c, value)
			}
			if step := 24 / k; EvenOpt && 24%k == 0 && time.Duration(step)*time.Hour >= lo {
				// Evenly spaced, at the best phase: what a steady source wants.
				even := dailySchedule{k: k}
				bestF := math.Inf(-1)
				for phase := range step {
					var f float64
					for i := range k {
						f += d.fresh[phase+i*step][step]
					}
					if f > bestF {
						bestF = f
						for i := range k {
							even.hours[i] = phase + i*step
						}
					}
				}
				consider(even, bestF-float64(k)*mu)
			}
		}
	}

	// Every x, whatever the hour: the phase drifts, so each check is
	// worth the average over the hours of the day.
	for _, x := range intervals {
		if x < time.Hour || x < lo || x > hi {
			continue
		}
		var f float64
		for h := range 24 {
			f += d.after(h, x)
		}
		f /= 24
		consider(dailySchedule{interval: x}, (f-mu)*daySeconds/x.Seconds())
	}

	// More often than hourly: evenly, a Poisson process hour by hour.
	for _, x := range []time.Duration{30 * time.Minute, 15 * time.Minute, 10 * time.Minute, 5 * time.Minute, 2 * time.Minute, time.Minute} {
		if x < lo || x > hi {
			continue
		}
		var f float64
		for _, l := range d.l {
			f += freshness.Freshness(l, x.Seconds()) * 3600
		}
		consider(dailySchedule{interval: x}, f-mu*daySeconds/x.Seconds())
	}
	if best.k > 0 {
		slices.Sort(best.hours[:best.k])
	}
	return best
}

// after returns the expected fresh seconds in the time x (whole hours are
// used) after a check at hour h.
func (d *day) after(h int, x time.Duration) float64 {
	n := int(x / time.Hour)
	days, rest := n/24, n%24
	sum, stay := 0.0, 1.0
	for range days {
		sum += stay * d.fresh[h][24]
		stay *= d.stay
	}
	return sum + stay*d.fresh[h][rest]
}

// gap is the number of hours from hour a to hour b, 24 if they are the
// same.
func gap(a, b int) int {
	if g := (b - a + 24) % 24; g > 0 {
		return g
	}
	return 24
}

// around returns the hours of the set before and after h (which is not in
// it); both are h if the set is empty.
func around(in *[24]bool, h int) (before, after int) {
	before, after = h, h
	for i := 1; i < 24; i++ {
		if in[(h-i+24)%24] {
			before = (h - i + 24) % 24
			break
		}
	}
	for i := 1; i < 24; i++ {
		if in[(h+i)%24] {
			after = (h + i) % 24
			break
		}
	}
	return before, after
}

// gaps returns the shortest and the longest time between two consecutive
// hours of the (non-empty) set.
func gaps(in *[24]bool) (shortest, longest time.Duration) {
	first, prev := -1, -1
	minH, maxH := 24, 0
	for h := range 24 {
		if !in[h] {
			continue
		}
		if prev >= 0 {
			minH, maxH = min(minH, h-prev), max(maxH, h-prev)
		} else {
			first = h
		}
		prev = h
	}
	g := gap(prev, first)
	minH, maxH = min(minH, g), max(maxH, g)
	return time.Duration(minH) * time.Hour, time.Duration(maxH) * time.Hour
}

// nextInHours returns the first time from t that is offset past the start
// of one of the UTC hours (sorted).
func nextInHours(t time.Time, hours []int, offset time.Duration) time.Time {
	day := t.UTC().Truncate(24 * time.Hour)
	for {
		for _, h := range hours {
			if c := day.Add(time.Duration(h)*time.Hour + offset); !c.Before(t) {
				return c
			}
		}
		day = day.Add(24 * time.Hour)
	}
}

var EvenOpt = true
