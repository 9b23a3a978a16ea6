// Package changerate estimates how often a repository changes, from the
// change times seen, and prices the checks of many repositories under one
// budget. The scheduler's adaptive policy (which learns from its checks
// and from pushes it is told of) and the feed planner (which learns from a
// forge's push times) share it, so that both model a repository the same
// way.
//
// Changes closer than EpisodeGap are one episode (a mirror stale since the
// first is not made staler by the next); episodes are counted with an
// exponential decay of time constant Decay, over an exposure that decays
// the same way, and a prior of PriorN episodes in PriorT keeps a repository
// seen for a short time from looking busy or dead.
//
// It is arithmetic on values passed in: no clock, no I/O, no goroutines.
package changerate

import (
	"math"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule/freshness"
)

// The change model's constants.
const (
	Decay      = 60 * 24 * time.Hour // observations lose weight e-fold in this time
	EpisodeGap = 30 * time.Minute    // changes closer than this are one episode
	PriorN     = 0.5                 // prior: this many episodes...
	PriorT     = 14 * 24 * time.Hour // ...in this time
)

// Estimate is what is known of one repository's change rate: the decayed
// count of episodes and the decayed exposure they were counted over. The
// zero value has counted nothing and starts its exposure at the first
// Decay. Times are kept as Unix nanoseconds, 0 meaning none, so that an
// estimate takes 40 bytes.
type Estimate struct {
	at      int64 // when the counts were last decayed
	seen    int64 // latest change time counted
	episode int64 // start of the last episode counted

	n, t float64 // decayed episodes, and exposure in seconds
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Start forgets everything and starts the exposure at t.
func (e *Estimate) Start(t time.Time) { *e = Estimate{at: nanos(t)} }

// Decay ages the counts to now and returns the weight that older episodes
// keep (1 when now is not after the last call).
func (e *Estimate) Decay(now time.Time) float64 {
	ns := nanos(now)
	if e.at == 0 {
		e.at = ns
		return 1
	}
	if ns <= e.at {
		return 1
	}
	tau := Decay.Seconds()
	w := math.Exp(-time.Duration(ns-e.at).Seconds() / tau)
	e.n *= w
	e.t = e.t*w + tau*(1-w)
	e.at = ns
	return w
}

// Count counts a change at t, seen at now; call Decay(now) first. isNew is
// false when t is not after the latest change counted (nothing is
// counted). w is the weight the change added: 0 when it continues the
// last episode, else its decayed weight (1 for a change now).
func (e *Estimate) Count(now, t time.Time) (w float64, isNew bool) {
	ts := nanos(t)
	if ts <= e.seen {
		return 0, false
	}
	e.seen = ts
	if e.episode != 0 && time.Duration(ts-e.episode) < EpisodeGap {
		return 0, true
	}
	e.episode = ts
	w = math.Exp(-max(now.Sub(t), 0).Seconds() / Decay.Seconds())
	e.n += w
	return w, true
}

// CountNow counts one episode at now, for a change seen without a time.
func (e *Estimate) CountNow(now time.Time) {
	e.seen, e.episode = nanos(now), nanos(now)
	e.n++
}

// Know records that the changes up to t are known without counting them:
// they were counted another way (a check that found them), so that the same
// change reported later is not counted again.
func (e *Estimate) Know(t time.Time) {
	e.seen = max(e.seen, nanos(t))
}

// Seen returns the latest change time counted or known (zero if none).
func (e *Estimate) Seen() time.Time {
	if e.seen == 0 {
		return time.Time{}
	}
	return time.Unix(0, e.seen).UTC()
}

// Rate returns the episode rate, a second.
func (e *Estimate) Rate() float64 {
	return (e.n + PriorN) / (e.t + PriorT.Seconds())
}

// The rate histogram's resolution.
const (
	binsPerOctave = 8
	minRate       = 1e-10 // slowest rate told apart: about once in 300 years
	// Bins is the number of rate bins.
	Bins = 36 * binsPerOctave
)

// Bin returns the bin of rate l (changes a second) in a Histogram.
func Bin(l float64) int {
	b := int(math.Floor(math.Log2(l/minRate) * binsPerOctave))
	return min(max(b, 0), Bins-1)
}

// BinRate returns the rate a bin stands for.
func BinRate(b int) float64 {
	return minRate * math.Exp2((float64(b)+0.5)/binsPerOctave)
}

// Histogram counts repositories by rate bin, so that the price of a check
// is solved over Bins rates, not over every repository.
type Histogram struct {
	bins [Bins]int
}

// Add counts one repository in bin b.
func (h *Histogram) Add(b int) { h.bins[b]++ }

// Remove uncounts one repository from bin b.
func (h *Histogram) Remove(b int) { h.bins[b]-- }

// Price returns the price mu (fresh-seconds a check must buy, see
// freshness.Interval) at which Poisson sources of the counted rates,
// checked at intervals within [minX, maxX] seconds, make budget checks a
// second. guess is the last price, where the search starts.
func (h *Histogram) Price(budget, minX, maxX, guess float64) float64 {
	demand := func(mu float64) float64 {
		var sum float64
		for b, n := range h.bins {
			if n > 0 {
				sum += float64(n) / min(max(freshness.Interval(BinRate(b), mu), minX), maxX)
			}
		}
		return sum
	}
	return freshness.Price(demand, budget, guess)
}
