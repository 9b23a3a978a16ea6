package sim

import (
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule/freshness"
)

// oracle with rates estimated from history only
func histOracle(tr *Trace, opts Options, histStart time.Time) Result {
	ms := newMirrors(tr, opts)
	_ = 0
	hspan := opts.Start.Sub(histStart).Seconds()
	rates := make([]float64, len(ms))
	for i, r := range tr.Repos {
		lo, _ := slices.BinarySearchFunc(r.Changes, opts.Start, time.Time.Compare)
		rates[i] = (float64(lo) + 0.5) / (hspan + 14*86400)
	}
	demand := func(mu float64) float64 {
		var sum float64
		for _, l := range rates {
			sum += 1 / freshness.Interval(l, mu)
		}
		return sum
	}
	mu := freshness.Price(demand, opts.Budget/3600, 0)
	checks := 0
	for i := range ms {
		x := freshness.Interval(rates[i], mu)
		if math.IsInf(x, 1) {
			continue
		}
		_, phase := math.Modf(float64(i+1) * 0.6180339887498949)
		step := time.Duration(x * 1e9)
		for t := opts.Start.Add(time.Duration(phase * float64(step))); t.Before(opts.End); t = t.Add(step) {
			checks++
			ms[i].check(t)
		}
	}
	return result("historacle", ms, opts, checks, 0)
}

func TestDbg3(t *testing.T) {
	if os.Getenv("DBG3") == "" {
		t.Skip()
	}
	for _, hist := range []int{30, 120} {
		tr := Generate(KindPoissonHeavyTail, 1000, hist+30, 1)
		opts := Options{Budget: 1000.0 / 24, Start: epoch.Add(time.Duration(hist) * 24 * time.Hour), End: epoch.Add(time.Duration(hist+30) * 24 * time.Hour)}
		r := histOracle(tr, opts, epoch)
		fmt.Printf("hist=%d historacle=%.4f (%d)\n", hist, 1-r.Freshness, r.Checks)
	}
}
