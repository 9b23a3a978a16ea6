package sim

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestExp(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	type tc struct {
		name  string
		tr    *Trace
		start time.Time
	}
	var cases []tc
	if f, err := os.Open("/work/shared/data/traces/github-365d.csv"); err == nil {
		tr, err := ReadTrace(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := tr.Span()
		cases = append(cases, tc{"github", tr, time.Time{}})
		cases = append(cases, tc{"github+30dhist", tr, first.Add(30 * 24 * time.Hour)})
	}
	for _, k := range []string{KindPoissonHeavyTail, KindWorkHours, KindBursty} {
		tr := Generate(k, 1000, 60, 1)
		first := epoch
		cases = append(cases, tc{k, tr, first.Add(30 * 24 * time.Hour)})
	}
	for _, c := range cases {
		for _, per := range []float64{0.5, 1, 4} {
			t0 := time.Now()
			res, err := Run(c.tr, Options{Budget: per * float64(len(c.tr.Repos)) / 24, Start: c.start})
			if err != nil {
				t.Fatal(err)
			}
			line := fmt.Sprintf("%-16s %4.1f/d ", c.name, per)
			for _, r := range res {
				line += fmt.Sprintf(" %s=%.4f(%d)", r.Policy, 1-r.Freshness, r.Checks)
			}
			fmt.Println(line, time.Since(t0).Round(time.Millisecond))
		}
	}
}
