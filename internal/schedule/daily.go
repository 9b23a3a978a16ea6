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

// init sets d up for a repository of rate changes a second with the
// hour-of-day profile prof.
func (d *day) init(rate float64, prof *[24]float64) {
	d.stay = 1
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
}

// dailySchedule is a schedule that repeats every day: every `every` at
// hours[0], or at hours[:k] each day, or every interval.
type dailySchedule struct {
	every    time.Duration
	k        int
	interval time.Duration
	hours    [24]int
}

// perDay returns how many checks a day the schedule makes.
func (s dailySchedule) perDay() float64 {
	switch {
	case s.every > 0:
		return daySeconds / s.every.Seconds()
	case s.k > 0:
		return float64(s.k)
	}
	return daySeconds / s.interval.Seconds()
}

// choose returns the daily schedule with the most fresh seconds a day less
// mu for each check, every gap between checks in [lo, hi]. x, in [lo, hi],
// is the closed-form interval for the repository's rate: every x is always
// a candidate.
func (d *day) choose(mu float64, lo, hi, x time.Duration) dailySchedule {
	best := dailySchedule{interval: x}
	bestValue := (d.every(x) - mu) * daySeconds / x.Seconds()
	consider := func(c dailySchedule, value float64) {
		if value > bestValue {
			best, bestValue = c, value
		}
	}

	// The hour after which the mirror stays fresh longest.
	first := 0
	for h := range 24 {
		if d.fresh[h][24] > d.fresh[first][24] {
			first = h
		}
	}

	// Every n days at that hour.
	for n := 1; n <= 7; n++ {
		every := time.Duration(n) * 24 * time.Hour
		if every < lo || every > hi {
			continue
		}
		days := float64(n) // sum of stay^i, i < n: fresh on day i if no change before it
		if d.stay < 1-1e-12 {
			days = (1 - math.Pow(d.stay, float64(n))) / (1 - d.stay)
		}
		c := dailySchedule{every: every}
		c.hours[0] = first
		consider(c, (d.fresh[first][24]*days-mu)/float64(n))
	}

	// k hours a day: added one by one where they gain most, or evenly
	// spaced at the best phase (what a steady source wants). Adding stops
	// once an hour costs more than it gains and the day is covered.
	if hi >= time.Hour && lo <= 12*time.Hour {
		var in [24]bool
		in[first] = true
		c := dailySchedule{k: 1}
		c.hours[0] = first
		value := d.fresh[first][24] - mu
		var prev, next [24]int // the hours of the set around each hour
		for k := 2; k <= 24; k++ {
			neighbours(&in, &prev, &next)
			add, gain := -1, math.Inf(-1)
			for h := range 24 {
				if in[h] {
					continue
				}
				a, b := prev[h], next[h]
				if g := d.fresh[a][gap(a, h)] + d.fresh[h][gap(h, b)] - d.fresh[a][gap(a, b)] - mu; g > gain {
					add, gain = h, g
				}
			}
			in[add] = true
			value += gain
			c.hours[k-1] = add
			c.k = k
			shortest, longest := gaps(&in)
			if longest <= hi && shortest >= lo {
				consider(c, value)
			}
			if step := 24 / k; 24%k == 0 && time.Duration(step)*time.Hour >= lo {
				even := dailySchedule{k: k}
				fresh := math.Inf(-1)
				for phase := range step {
					var f float64
					for i := range k {
						f += d.fresh[phase+i*step][step]
					}
					if f > fresh {
						fresh = f
						for i := range k {
							even.hours[i] = phase + i*step
						}
					}
				}
				consider(even, fresh-float64(k)*mu)
			}
			if gain < 0 && longest <= hi {
				break
			}
		}
	}

	// More often than hourly, if hourly is not enough.
	if best.k == 24 || best.interval > 0 && best.interval < time.Hour {
		for _, x := range subHourly {
			if x >= lo && x <= hi {
				consider(dailySchedule{interval: x}, (d.every(x)-mu)*daySeconds/x.Seconds())
			}
		}
	}
	if best.k > 0 {
		slices.Sort(best.hours[:best.k])
	}
	return best
}

var subHourly = [...]time.Duration{
	45 * time.Minute, 30 * time.Minute, 20 * time.Minute, 15 * time.Minute, 10 * time.Minute,
	7*time.Minute + 30*time.Second, 5 * time.Minute, 3 * time.Minute, 2 * time.Minute, time.Minute,
}

// every returns the expected fresh seconds after a check, when checks come
// every x whatever the hour: the average over the hours of the day. Under
// an hour, each hour is a Poisson process of its own rate.
func (d *day) every(x time.Duration) float64 {
	var f float64
	for h := range 24 {
		if x < time.Hour {
			f += freshness.Freshness(d.l[h], x.Seconds()) * x.Seconds()
		} else {
			f += d.after(h, x)
		}
	}
	return f / 24
}

// after returns the expected fresh seconds in the time x (in whole hours)
// after a check at hour h.
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

// neighbours sets prev[h] and next[h] to the hours of the (non-empty) set
// before and after each hour h.
func neighbours(in *[24]bool, prev, next *[24]int) {
	last := -1
	for h := 23; h >= 0 && last < 0; h-- {
		if in[h] {
			last = h
		}
	}
	for h := range 24 {
		prev[h] = last
		if in[h] {
			last = h
		}
	}
	for h := 23; h >= 0; h-- {
		if in[h] {
			last = h
		}
	}
	for h := 23; h >= 0; h-- {
		next[h] = last
		if in[h] {
			last = h
		}
	}
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
