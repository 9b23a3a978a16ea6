package schedule

import (
	"math"
	"slices"
	"time"
)

// The change model's constants.
const (
	rateDecay    = 60 * 24 * time.Hour // observations lose weight e-fold in this time
	episodeGap   = 30 * time.Minute    // changes closer than this are one episode
	priorN       = 0.5                 // prior: this many episodes...
	priorT       = 14 * 24 * time.Hour // ...in this time
	profilePrior = 24.0                // pseudo-episodes spread evenly over the day
)

// estimate is what the adaptive policy knows of one repository's changes:
// episodes (changes closer than episodeGap are one: a mirror stale since
// the first is not made staler by the next) counted with exponential decay,
// the time they were counted over, and the hour of the day (UTC) they
// happen at.
type estimate struct {
	at      time.Time // when the counts were last decayed
	seen    time.Time // latest change time counted
	episode time.Time // start of the last episode counted

	n, t float64     // decayed episodes, and exposure in seconds
	hour [24]float32 // decayed episodes by hour of day

	bin     int     // rate bin the repository is counted in, -1 if none
	planned float64 // checks a second its schedule makes
}

func (e *estimate) decayTo(now time.Time) {
	if !now.After(e.at) {
		return
	}
	tau := rateDecay.Seconds()
	w := math.Exp(-now.Sub(e.at).Seconds() / tau)
	e.n *= w
	e.t = e.t*w + tau*(1-w)
	for i := range e.hour {
		e.hour[i] *= float32(w)
	}
	e.at = now
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
		if !t.After(e.seen) {
			continue
		}
		e.seen = t
		counted = true
		if !e.episode.IsZero() && t.Sub(e.episode) < episodeGap {
			continue
		}
		e.episode = t
		w := math.Exp(-max(now.Sub(t), 0).Seconds() / rateDecay.Seconds())
		e.n += w
		e.hour[t.UTC().Hour()] += float32(w)
	}
	if changed && !counted {
		e.seen, e.episode = now, now
		e.n++
	}
}

// begin starts an estimate from a repository's known history: observation
// starts at its first known change (or its last, if that is all that is
// known).
func (e *estimate) begin(history []time.Time, lastChange, now time.Time) {
	e.at, e.seen, e.episode = now, time.Time{}, time.Time{}
	e.n, e.t, e.hour = 0, 0, [24]float32{}
	first := lastChange
	for _, t := range history {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if first.IsZero() || !first.Before(now) {
		return
	}
	e.at = first
	e.observe(now, history, false)
}

// rate is the episode rate, a second.
func (e *estimate) rate() float64 {
	return (e.n + priorN) / (e.t + priorT.Seconds())
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
