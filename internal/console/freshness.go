package console

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Sample is how many repositories were current, of how many, at one time.
type Sample struct {
	At             time.Time
	Current, Total int
}

// Freshness is a ring of samples of the share current: one per interval,
// the last day's by default (144 of ten minutes). It is given the time of
// each sample, and is safe for concurrent use.
type Freshness struct {
	every time.Duration

	mu   sync.Mutex
	ring []Sample
	next int // where the next sample goes
	full bool
}

// FreshnessEvery and FreshnessSamples are the defaults: a day of samples
// ten minutes apart.
const (
	FreshnessEvery   = 10 * time.Minute
	FreshnessSamples = 144
)

// NewFreshness returns a ring of n samples taken every interval.
func NewFreshness(every time.Duration, n int) *Freshness {
	return &Freshness{every: every, ring: make([]Sample, max(n, 1))}
}

// Every is the interval between two samples.
func (f *Freshness) Every() time.Duration { return f.every }

// Record keeps a sample taken at at, unless the last one was taken less
// than the interval before (a sample too soon is dropped, so that a
// restarted timer does not crowd the ring). It tells whether it kept it.
func (f *Freshness) Record(at time.Time, current, total int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if last := f.lastLocked(); last != nil && at.Sub(last.At) < f.every*9/10 {
		return false
	}
	f.ring[f.next] = Sample{At: at, Current: current, Total: total}
	f.next = (f.next + 1) % len(f.ring)
	f.full = f.full || f.next == 0
	return true
}

func (f *Freshness) lastLocked() *Sample {
	if !f.full && f.next == 0 {
		return nil
	}
	return &f.ring[(f.next+len(f.ring)-1)%len(f.ring)]
}

// Samples returns the samples kept, oldest first.
func (f *Freshness) Samples() []Sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.full {
		return append([]Sample(nil), f.ring[:f.next]...)
	}
	return append(append([]Sample(nil), f.ring[f.next:]...), f.ring[:f.next]...)
}

// freshChart is the freshness over the last day as SVG bars, one a
// sample, the share now the last.
type freshChart struct {
	Width, Height int
	Bars          []freshBar
	Samples       int
	Lowest, Now   string // shares
	Since         time.Time
}

// freshBar is one sample's bar: its x and its top (y) in the chart.
type freshBar struct {
	X, Y, H int
}

// chart draws samples and the share now from the left edge (oldest) to
// the right (now); a full share is a bar of the chart's height.
func chart(samples []Sample, current, total int) freshChart {
	const step, height = 2, 60
	all := append(append([]Sample(nil), samples...), Sample{Current: current, Total: total})
	c := freshChart{Width: step * (FreshnessSamples + 1), Height: height, Samples: len(samples), Now: percent(current, total)}
	if len(samples) > 0 {
		c.Since = samples[0].At
	}
	lowest, any := 1.0, false
	x0 := c.Width - step*len(all)
	for i, s := range all {
		share := 0.0
		if s.Total > 0 {
			share = float64(s.Current) / float64(s.Total)
			lowest, any = min(lowest, share), true
		}
		h := int(math.Round(share * height))
		c.Bars = append(c.Bars, freshBar{X: x0 + i*step, Y: height - h, H: h})
	}
	if any {
		c.Lowest = fmt.Sprintf("%.1f%%", 100*lowest)
	}
	return c
}
