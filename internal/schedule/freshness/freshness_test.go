package freshness

import (
	"math"
	"testing"
)

func TestFreshness(t *testing.T) {
	tests := []struct {
		name string
		l, x float64
		want float64
	}{
		{"never changes", 0, 100, 1},
		{"checked continuously", 1, 0, 1},
		{"one change per interval", 1, 1, 1 - math.Exp(-1)},
		{"ten changes per interval", 1, 10, (1 - math.Exp(-10)) / 10},
		{"never checked", 1, math.Inf(1), 0},
		{"tiny l x", 1e-12, 1, 1 - 0.5e-12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Freshness(tt.l, tt.x); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Freshness(%v, %v) = %v, want %v", tt.l, tt.x, got, tt.want)
			}
		})
	}
}

func TestIntervalEqualisesTheMarginalGain(t *testing.T) {
	for _, l := range []float64{1e-6, 1e-4, 1e-2} {
		for _, mu := range []float64{1, 100, 5000} {
			x := Interval(l, mu)
			if mu*l >= 1 {
				if !math.IsInf(x, 1) {
					t.Errorf("Interval(%v, %v) = %v, want +Inf: a check cannot buy %v seconds", l, mu, x, mu)
				}
				continue
			}
			r := l * x
			if gain := 1 - (1+r)*math.Exp(-r); math.Abs(gain-mu*l) > 1e-9*mu*l {
				t.Errorf("Interval(%v, %v) = %v: marginal gain %v, want %v", l, mu, x, gain, mu*l)
			}
		}
	}
	if x := Interval(1e-3, 0); x != 0 {
		t.Errorf("Interval at price 0 = %v, want 0", x)
	}
	if x := Interval(0, 10); !math.IsInf(x, 1) {
		t.Errorf("Interval of a source that never changes = %v, want +Inf", x)
	}
}

func TestIntervalChecksFastSourcesLess(t *testing.T) {
	// Cho & Garcia-Molina: the optimal frequency first grows with the
	// change rate, then falls, down to nothing for sources too fast.
	const mu = 1000.0
	f := func(l float64) float64 { return 1 / Interval(l, mu) }
	if !(f(1e-5) < f(1e-4)) || !(f(5e-4) > f(9e-4)) || f(2e-3) != 0 {
		t.Errorf("frequencies %v, %v, %v, %v, %v: want rising, then falling to 0", f(1e-5), f(1e-4), f(5e-4), f(9e-4), f(2e-3))
	}
}

func TestPriceSpendsTheBudget(t *testing.T) {
	rates := []float64{1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2}
	demand := func(mu float64) float64 {
		var sum float64
		for _, l := range rates {
			sum += 1 / Interval(l, mu)
		}
		return sum
	}
	for _, budget := range []float64{1e-5, 1e-4, 1e-3} {
		for _, guess := range []float64{0, 1, 1e6} {
			mu := Price(demand, budget, guess)
			if got := demand(mu); math.Abs(got-budget) > 1e-3*budget {
				t.Errorf("Price(budget %v, guess %v) = %v: demand %v", budget, guess, mu, got)
			}
		}
	}
	capped := func(mu float64) float64 { return math.Max(1, demand(mu)) }
	if mu := Price(capped, 0.5, 0); !math.IsInf(mu, 1) {
		t.Errorf("Price for a budget below the least demand = %v, want +Inf", mu)
	}
	if mu := Price(func(float64) float64 { return 1 }, 2, 0); mu != 0 {
		t.Errorf("Price for a budget above the most demand = %v, want 0", mu)
	}
}
