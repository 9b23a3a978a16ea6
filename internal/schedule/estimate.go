package schedule

import (
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule/changerate"
)

// profilePrior is the number of pseudo-episodes spread evenly over the day
// that pull a repository's hour-of-day profile towards flat.
const profilePrior = 24.0

// estimate is what the adaptive policy knows of one repository's changes:
// its change rate (changerate.Estimate: episodes counted with decay) and
// the hour of the day (UTC) its episodes happen at, decayed alike.
type estimate struct {
	rate changerate.Estimate
	hour [24]float32 // decayed episodes by hour of day

	bin     int     // rate bin the repository is counted in, -1 if none
	planned float64 // checks a second its schedule makes
}

func (e *estimate) decayTo(now time.Time) {
	if w := e.rate.Decay(now); w != 1 {
		for i := range e.hour {
			e.hour[i] *= float32(w)
		}
	}
}

// observe counts the changes at times ts that are newer than those seen;
// when changed is true and none of ts is new, it counts one episode now.
func (e *estimate) observe(now time.Time, ts []time.Time, changed bool) {
	e.decayTo(now)
	if !slices.IsSortedFunc(ts, time.Time.Compare) {
		ts = slices.SortedFunc(slices.Values(ts), time.Time.Compare)
	}
	counted := false
	for _, t := range ts {
		w, isNew := e.rate.Count(now, t)
		counted = counted || isNew
		if w > 0 {
			e.hour[t.UTC().Hour()] += float32(w)
		}
	}
	if changed && !counted {
		e.rate.CountNow(now)
	}
}

// begin starts an estimate from a repository's known history: observation
// starts at its first known change (or its last, if that is all that is
// known).
func (e *estimate) begin(history []time.Time, lastChange, now time.Time) {
	e.rate.Start(now)
	e.hour = [24]float32{}
	first := lastChange
	for _, t := range history {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if first.IsZero() || !first.Before(now) {
		return
	}
	e.rate.Start(first)
	e.observe(now, history, false)
}

// dayProfile fills f with the relative intensity of each hour of the day
// (UTC), averaging 1, pulled towards flat by profilePrior pseudo-episodes.
func (e *estimate) dayProfile(f *[24]float64) {
	var sum float64
	for _, v := range e.hour {
		sum += float64(v)
	}
	for h, v := range e.hour {
		f[h] = 24 * (float64(v) + profilePrior/24) / (sum + profilePrior)
	}
}
