// Package freshness is the theory the adaptive scheduler and the
// simulator's oracle share (Cho & Garcia-Molina, "Synchronizing a database
// to improve freshness", SIGMOD 2000): how fresh a source that changes as a
// Poisson process stays when it is checked periodically, and which check
// intervals maximise the total freshness of many sources under a budget.
//
// It is arithmetic only: no state, no time, no I/O.
package freshness

import "math"

// Freshness is the share of time a source that changes at rate l (changes
// a second) is up to date when checked every x seconds:
// (1 - e^(-l x)) / (l x).
func Freshness(l, x float64) float64 {
	r := l * x
	switch {
	case l <= 0:
		return 1
	case math.IsInf(x, 1):
		return 0
	case r < 1e-9:
		return 1 - r/2
	}
	return -math.Expm1(-r) / r
}

// Interval is the check interval, in seconds, that a source of rate l gets
// at price mu (the freshness-seconds a check must buy): the x at which the
// marginal gain of checking more often, 1 - (1 + l x) e^(-l x), equals mu
// l. It is +Inf when mu l >= 1 (the source changes too often to be worth
// checking) or l <= 0, and 0 when mu <= 0.
func Interval(l, mu float64) float64 {
	y := mu * l
	switch {
	case l <= 0 || y >= 1:
		return math.Inf(1)
	case y <= 0:
		return 0
	}
	return gainInverse(y) / l
}

// gainInverse solves 1 - (1 + r) e^(-r) = y for r > 0, 0 < y < 1, by
// Newton's method kept inside a bracket.
func gainInverse(y float64) float64 {
	g := func(r float64) float64 { return 1 - (1+r)*math.Exp(-r) }
	lo, hi := 0.0, 1.0
	for g(hi) < y {
		lo, hi = hi, hi*2
	}
	r := math.Sqrt(2 * y) // g(r) ~ r^2/2 near 0
	if r <= lo || r >= hi {
		r = (lo + hi) / 2
	}
	for range 60 {
		v := g(r) - y
		if math.Abs(v) <= 1e-12*y {
			break
		}
		if v > 0 {
			hi = r
		} else {
			lo = r
		}
		next := r - v/(r*math.Exp(-r))
		if !(next > lo && next < hi) {
			next = (lo + hi) / 2
		}
		r = next
	}
	return r
}

// Price returns the price mu at which demand(mu), the checks a second that
// the intervals at price mu add up to, meets budget. demand must not grow
// with mu. guess, if positive and finite, is where the search starts (the
// last price, when rates moved a little). It returns 0 when demand(0) fits
// the budget and +Inf when even demand(+Inf) exceeds it.
func Price(demand func(mu float64) float64, budget, guess float64) float64 {
	switch {
	case demand(0) <= budget:
		return 0
	case demand(math.Inf(1)) >= budget:
		return math.Inf(1)
	}
	lo, hi := 1.0, 1.0
	if guess > 0 && !math.IsInf(guess, 1) {
		lo, hi = guess, guess
	}
	for demand(lo) <= budget {
		lo /= 2
	}
	for demand(hi) > budget {
		hi *= 2
	}
	for hi/lo > 1+1e-4 {
		m := math.Sqrt(lo * hi)
		if demand(m) > budget {
			lo = m
		} else {
			hi = m
		}
	}
	return math.Sqrt(lo * hi)
}
