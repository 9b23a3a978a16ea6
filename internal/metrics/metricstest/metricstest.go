// Package metricstest reads a registry's figures in tests: the value of
// one sample, chosen by its family and labels. Only tests import it.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value is the value of family's first sample whose labels include want
// (name, value pairs; a histogram's value is its count), and whether
// there is one.
func Value(t testing.TB, reg prometheus.Gatherer, family string, want ...string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(want); i += 2 {
				if labels[want[i]] != want[i+1] {
					continue next
				}
			}
			switch {
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			default:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}
