package schedule

import (
	"math"
	"slices"
	"time"
)

const harmonics = 8 // of the time-of-day profile

// Tuning of the change model (variables while tuning).
var (
	RateDecay   = 60 * 24 * time.Hour // observations lose weight e-fold in this time
	EpisodeGap  = 30 * time.Minute    // changes closer than this are one episode
	PriorN      = 0.5                 // prior: this many episodes...
	PriorT      = 14 * 24 * time.Hour // ...in this time
	ProfilePrio = 24.0                // pseudo-episodes spread evenly over the day
)

// estimate is what the adaptive policy knows of one repository's changes:
// episodes (changes closer than EpisodeGap are one: a mirror stale since
// the first is not made staler by the next) counted with exponential decay,
// the time they were counted over, and the hour of the day (UTC) they
// happen at.
type estimate struct {
	at      time.Time // when the counts were last decayed
	seen    time.Time // latest change time counted
	episode time.Time // start of the last episode counted

	n, t float64 // decayed episodes, and exposure in seconds
	// harmonics of the time of day of the episodes: decayed sums of
	// cos(k θ) and sin(k θ), θ the time of day as an angle, k = 1..
	cos, sin [harmonics]float64

	bin  int       // rate bin the repository is counted in, -1 if none
	plan footprint // the daily schedule it is planned on
}

func (e *estimate) decayTo(now time.Time) {
	if !now.After(e.at) {
		return
	}
	tau := RateDecay.Seconds()
	w := math.Exp(-now.Sub(e.at).Seconds() / tau)
	e.n *= w
	e.t = e.t*w + tau*(1-w)
	for k := range harmonics {
		e.cos[k] *= w
		e.sin[k] *= w
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
		if !e.episode.IsZero() && t.Sub(e.episode) < EpisodeGap {
			continue
		}
		e.episode = t
		w := math.Exp(-max(now.Sub(t), 0).Seconds() / RateDecay.Seconds())
		e.n += w
		u := t.UTC()
		theta := 2 * math.Pi * float64(u.Hour()*3600+u.Minute()*60+u.Second()) / daySeconds
		for k := range harmonics {
			s, c := math.Sincos(float64(k+1) * theta)
			e.cos[k] += w * c
			e.sin[k] += w * s
		}
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
	e.n, e.t, e.cos, e.sin = 0, 0, [harmonics]float64{}, [harmonics]float64{}
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
	return (e.n + PriorN) / (e.t + PriorT.Seconds())
}

// dayProfile fills f with the relative intensity of each hour of the day
// (UTC), averaging 1: the first harmonics of the episodes' times of day,
// each shrunk by n/(n+ProfilePrio) so that a few episodes make a flat
// profile.
func (e *estimate) dayProfile(f *[24]float64) {
	if e.n <= 0 {
		*f = [24]float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
		return
	}
	shrink := 1 / (e.n + ProfilePrio)
	var sum float64
	for h := range f {
		theta := 2 * math.Pi * (float64(h) + 0.5) / 24
		v := 1.0
		for k := range harmonics {
			s, c := math.Sincos(float64(k+1) * theta)
			v += 2 * shrink * (e.cos[k]*c + e.sin[k]*s)
		}
		f[h] = max(v, 0.02)
		sum += f[h]
	}
	for h := range f {
		f[h] *= 24 / sum
	}
}
