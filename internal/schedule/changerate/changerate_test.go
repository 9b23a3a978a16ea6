package changerate

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func TestAnEstimateWithNothingCountedIsThePrior(t *testing.T) {
	var e Estimate
	e.Start(t0)
	if want := PriorN / PriorT.Seconds(); e.Rate() != want {
		t.Errorf("Rate() = %v, want the prior %v", e.Rate(), want)
	}
}

func TestChangesCloserThanTheGapAreOneEpisode(t *testing.T) {
	var e Estimate
	e.Start(t0)
	now := t0.Add(time.Hour)
	e.Decay(now)
	steps := []struct {
		at     time.Duration
		weight bool
		isNew  bool
	}{
		{10 * time.Minute, true, true},
		{20 * time.Minute, false, true}, // same episode
		{20 * time.Minute, false, false},
		{5 * time.Minute, false, false}, // older than seen
		{45 * time.Minute, true, true},  // 35 minutes after the episode began
	}
	for _, s := range steps {
		w, isNew := e.Count(now, t0.Add(s.at))
		if (w > 0) != s.weight || isNew != s.isNew {
			t.Errorf("Count(+%v) = %v, %v; want weight %v, new %v", s.at, w, isNew, s.weight, s.isNew)
		}
	}
	if got := e.Seen(); !got.Equal(t0.Add(45 * time.Minute)) {
		t.Errorf("Seen() = %v", got)
	}
}

func TestKnownChangesAreNotCountedLater(t *testing.T) {
	var e Estimate
	e.Start(t0)
	e.Decay(t0.Add(time.Hour))
	e.Know(t0.Add(30 * time.Minute))
	if _, isNew := e.Count(t0.Add(time.Hour), t0.Add(30*time.Minute)); isNew {
		t.Error("a known change was counted")
	}
}

func TestTheRateFollowsThePushes(t *testing.T) {
	var e Estimate
	e.Start(t0)
	now := t0
	for range 24 * 200 { // one push an hour for 200 days
		now = now.Add(time.Hour)
		e.Decay(now)
		e.Count(now, now)
	}
	// The decayed exposure is tau(1-e^(-T/tau)), the episodes one an
	// hour of it; the prior adds PriorN in PriorT.
	tau := Decay.Seconds()
	exposure := tau * -math.Expm1(-(200*24*time.Hour).Seconds()/tau)
	want := (exposure/3600 + PriorN) / (exposure + PriorT.Seconds())
	if got := e.Rate(); math.Abs(got-want) > 0.01*want {
		t.Errorf("Rate() = %v, want about %v", got, want)
	}
}

func TestPriceMeetsTheBudget(t *testing.T) {
	var h Histogram
	for i := range 1000 {
		h.Add(Bin(float64(i+1) / 86400 / 100)) // 0.01 to 10 changes a day
	}
	budget := 1000.0 / 86400 // one check a day each
	mu := h.Price(budget, 60, 7*86400, 0)
	if !(mu > 0) || math.IsInf(mu, 1) {
		t.Fatalf("Price = %v, want a finite positive price", mu)
	}
	if lower := h.Price(budget/2, 60, 7*86400, mu); !(lower > mu) {
		t.Errorf("half the budget gives price %v, want more than %v", lower, mu)
	}
}
