package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

// epoch is when generated traces start: Monday 2025-01-06, 00:00 UTC.
var epoch = time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)

// Generated trace kinds.
const (
	// KindPoissonHeavyTail: every repository changes as a Poisson process;
	// rates across repositories are heavy-tailed.
	KindPoissonHeavyTail = "poisson-heavytail"
	// KindWorkHours: the same rates, but changes happen only on weekdays
	// between 9:00 and 18:00 in the repository's time zone.
	KindWorkHours = "workhours"
	// KindBursty: the same average rates, but changes come in bursts of
	// pushes minutes apart, mostly in working hours, and some weeks are
	// silent.
	KindBursty = "bursty"
	// KindMixed: a large catalog's population. Most repositories are
	// quiet (a change every few weeks or months), a few are busy (one to
	// twenty changes a day); both change in bursts, mostly in working
	// hours, as KindBursty does.
	KindMixed = "mixed"
)

// Shape of the generated traces.
const (
	rateMinPerDay = 0.03 // Pareto scale of the daily change rate
	rateMaxPerDay = 20   // cap of the daily change rate
	rateTail      = 0.5  // Pareto shape: median 0.12/day, 17% above 1/day
	workStart     = 9 * time.Hour
	workLength    = 9 * time.Hour
	burstMean     = 3.0              // changes per burst, on average
	burstGap      = 10 * time.Minute // mean time between changes of a burst
	burstAtWork   = 0.8              // share of bursts that start in working hours

	mixedBusyShare = 0.3  // share of busy repositories in KindMixed
	mixedQuietMin  = 0.01 // Pareto scale of a quiet repository's daily rate
	mixedQuietMax  = 0.5  // cap of a quiet repository's daily rate
	mixedBusyMin   = 1.0  // busy repositories' daily rates are log-uniform
	mixedBusyMax   = 20.0 // between these
)

var timeZones = []int{-8, -7, -5, -4, -3, 0, 1, 2, 3, 5, 8, 9} // hours east of UTC

// Generate returns a synthetic trace of n repositories over days days
// from Monday 2025-01-06 00:00 UTC, of the given kind (KindPoissonHeavyTail,
// KindWorkHours, KindBursty or KindMixed), the same for the same seed. Repositories
// are spread over github.com (70%), gitlab.com (20%) and gitee.com (10%).
// Generate panics on an unknown kind.
func Generate(kind string, n, days int, seed int64) *Trace {
	h := fnv.New64a()
	h.Write([]byte(kind))
	rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	end := epoch.Add(time.Duration(days) * 24 * time.Hour)
	byKey := make(map[string][]time.Time, n)
	for i := range n {
		host := "github.com"
		switch i % 10 {
		case 7, 8:
			host = "gitlab.com"
		case 9:
			host = "gitee.com"
		}
		key := fmt.Sprintf("%s/%s/r%05d", host, kind, i)
		perDay := min(rateMaxPerDay, rateMinPerDay*math.Pow(1-rng.Float64(), -1/rateTail))
		tz := time.Duration(timeZones[rng.IntN(len(timeZones))]) * time.Hour
		var cs []time.Time
		switch kind {
		case KindPoissonHeavyTail:
			cs = poissonChanges(rng, perDay, end)
		case KindWorkHours:
			cs = workHourChanges(rng, perDay, tz, end)
		case KindBursty:
			cs = burstyChanges(rng, perDay, tz, end)
		case KindMixed:
			if rng.Float64() < mixedBusyShare {
				perDay = mixedBusyMin * math.Pow(mixedBusyMax/mixedBusyMin, rng.Float64())
			} else {
				perDay = min(mixedQuietMax, mixedQuietMin/(1-rng.Float64()))
			}
			cs = burstyChanges(rng, perDay, tz, end)
		default:
			panic(fmt.Sprintf("sim: unknown trace kind %q", kind))
		}
		byKey[key] = cs
	}
	return newTrace(byKey)
}

func truncSecond(t time.Time) time.Time { return time.Unix(t.Unix(), 0).UTC() }

func poissonChanges(rng *rand.Rand, perDay float64, end time.Time) []time.Time {
	var cs []time.Time
	mean := 24 * time.Hour.Seconds() / perDay
	for t := epoch; ; {
		t = t.Add(time.Duration(rng.ExpFloat64() * mean * 1e9))
		if !t.Before(end) {
			return cs
		}
		cs = append(cs, truncSecond(t))
	}
}

// workdayStart returns the start of working hours, in UTC, of the k-th
// weekday (from 0) after epoch in time zone tz.
func workdayStart(k int, tz time.Duration) time.Time {
	day := k/5*7 + k%5
	return epoch.Add(time.Duration(day)*24*time.Hour + workStart - tz)
}

func workHourChanges(rng *rand.Rand, perDay float64, tz time.Duration, end time.Time) []time.Time {
	var cs []time.Time
	// A Poisson process on a clock that only runs in working hours, with
	// the rate that gives perDay changes a calendar day on average.
	mean := workLength.Seconds() * 5 / 7 / perDay
	for w := 0.0; ; {
		w += rng.ExpFloat64() * mean
		k := int(w / workLength.Seconds())
		t := workdayStart(k, tz).Add(time.Duration((w - float64(k)*workLength.Seconds()) * 1e9))
		if !t.Before(end) {
			return cs
		}
		if !t.Before(epoch) {
			cs = append(cs, truncSecond(t))
		}
	}
}

func burstyChanges(rng *rand.Rand, perDay float64, tz time.Duration, end time.Time) []time.Time {
	var cs []time.Time
	active := 0.25 + 0.75*rng.Float64() // share of weeks with any activity
	week := 7 * 24 * time.Hour
	for w := epoch.Add(-tz); w.Before(end); w = w.Add(week) {
		if rng.Float64() >= active {
			continue
		}
		for range poisson(rng, perDay*7/burstMean/active) {
			var t time.Time
			if rng.Float64() < burstAtWork {
				t = w.Add(time.Duration(rng.IntN(5))*24*time.Hour + workStart +
					time.Duration(rng.Float64()*float64(workLength)))
			} else {
				t = w.Add(time.Duration(rng.Float64() * float64(week)))
			}
			for {
				if !t.Before(epoch) && t.Before(end) {
					cs = append(cs, truncSecond(t))
				}
				if rng.Float64() >= 1-1/burstMean {
					break
				}
				t = t.Add(time.Duration(rng.ExpFloat64() * float64(burstGap)))
			}
		}
	}
	return cs
}

// poisson draws from a Poisson distribution of the given mean.
func poisson(rng *rand.Rand, mean float64) int {
	if mean > 30 {
		return max(0, int(math.Round(mean+math.Sqrt(mean)*rng.NormFloat64())))
	}
	k, p, l := 0, 1.0, math.Exp(-mean)
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
