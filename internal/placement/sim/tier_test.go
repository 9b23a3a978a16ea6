package sim

import (
	"testing"
)

func tierRun(t testing.TB, o tierOptions) []tierStep {
	var steps []tierStep
	if err := runTier(o, func(s tierStep) error { steps = append(steps, s); return nil }); err != nil {
		t.Fatal(err)
	}
	return steps
}

// The tier's targets, at a tenth of the scale of docs/benchmarks.md: bytes
// per full node within 1.1x the mean, and a join and a loss moving at most
// 1.1x the ideal R×K/N.
func TestTierMeetsTheTargets(t *testing.T) {
	steps := tierRun(t, tierOptions{keys: 100_000, nodes: 20, replicas: 2, seed: 1, totalBytes: 5e12, sigma: 2, link: 1e9 / 8})
	if len(steps) != 3 {
		t.Fatalf("got %d steps, want 3", len(steps))
	}
	for _, s := range steps {
		if s.MaxOverMean > 1.1+1e-9 {
			t.Errorf("%s: bytes max/mean %.3f, want at most 1.1", s.Step, s.MaxOverMean)
		}
		if s.Ideal > 0 && float64(s.Moved) > 1.1*s.Ideal {
			t.Errorf("%s: moved %d, more than 1.1x the ideal %.0f", s.Step, s.Moved, s.Ideal)
		}
		if s.Step != "start" && s.Seconds <= 0 {
			t.Errorf("%s: restored in %v s, want a time", s.Step, s.Seconds)
		}
	}
}
