package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule"
)

type sweepCase struct {
	name  string
	tr    *Trace
	start time.Time
}

func sweepCases(t *testing.T) []sweepCase {
	var cases []sweepCase
	f, err := os.Open("/work/shared/data/traces/github-365d.csv")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := tr.Span()
	cases = append(cases, sweepCase{"github", tr, time.Time{}})
	cases = append(cases, sweepCase{"githubH", tr, first.Add(60 * 24 * time.Hour)})
	for _, k := range []string{KindPoissonHeavyTail, KindWorkHours, KindBursty} {
		for seed := int64(1); seed <= 2; seed++ {
			cases = append(cases, sweepCase{fmt.Sprintf("%s%d", k[:5], seed), Generate(k, 1000, 60, seed), epoch.Add(30 * 24 * time.Hour)})
		}
	}
	return cases
}

func baselines(t *testing.T, cases []sweepCase, pers []float64) map[string][]Result {
	path := "/tmp/baselines.json"
	m := map[string][]Result{}
	if b, err := os.ReadFile(path); err == nil {
		json.Unmarshal(b, &m)
	}
	changed := false
	for _, c := range cases {
		for _, per := range pers {
			k := fmt.Sprintf("%s@%g", c.name, per)
			if _, ok := m[k]; ok {
				continue
			}
			res, err := Run(c.tr, Options{Policies: []string{"fixed", "compass", "sourcegraph", "optimal"}, Budget: per * float64(len(c.tr.Repos)) / 24, Start: c.start})
			if err != nil {
				t.Fatal(err)
			}
			m[k] = res
			changed = true
		}
	}
	if changed {
		b, _ := json.Marshal(m)
		os.WriteFile(path, b, 0o644)
	}
	return m
}

func TestSweep(t *testing.T) {
	spec := os.Getenv("SWEEP") // name=v1,v2,...
	if spec == "" {
		t.Skip()
	}
	name, vals, _ := strings.Cut(spec, "=")
	cases := sweepCases(t)
	pers := []float64{0.5, 1, 4}
	if s := os.Getenv("PER"); s != "" {
		pers = nil
		for _, p := range strings.Split(s, ",") {
			f, _ := strconv.ParseFloat(p, 64)
			pers = append(pers, f)
		}
	}
	base := baselines(t, cases, pers)
	for _, v := range strings.Split(vals, ",") {
		set(name, v)
		for _, per := range pers {
			line := fmt.Sprintf("%s=%-6s %3g/d", name, v, per)
			var sumB, sumO float64
			worstB := 0.0
			for _, c := range cases {
				res, err := Run(c.tr, Options{Policies: []string{"adaptive"}, Budget: per * float64(len(c.tr.Repos)) / 24, Start: c.start})
				if err != nil {
					t.Fatal(err)
				}
				a := 1 - res[0].Freshness
				b := base[fmt.Sprintf("%s@%g", c.name, per)]
				best := math.Min(1-b[0].Freshness, math.Min(1-b[1].Freshness, 1-b[2].Freshness))
				opt := 1 - b[3].Freshness
				line += fmt.Sprintf(" %s=%.3f/%.3f", c.name, a/best, a/opt)
				sumB += math.Log(a / best)
				sumO += math.Log(a / opt)
				worstB = math.Max(worstB, a/best)
			}
			n := float64(len(cases))
			fmt.Printf("%s | gm %.3f/%.3f worst %.3f\n", line, math.Exp(sumB/n), math.Exp(sumO/n), worstB)
		}
	}
}

func set(name, v string) {
	d, _ := time.ParseDuration(v)
	f, _ := strconv.ParseFloat(v, 64)
	switch name {
	case "RateDecay":
		schedule.RateDecay = d
	case "EpisodeGap":
		schedule.EpisodeGap = d
	case "PriorN":
		schedule.PriorN = f
	case "PriorT":
		schedule.PriorT = d
	case "ProfilePrio":
		schedule.ProfilePrio = f
	case "KappaGain":
		schedule.KappaGain = f
	case "Drain":
		schedule.BacklogDrain = d
	case "AgeHack":
		schedule.AgeHack = f
	case "AgeRef":
		schedule.AgeRef = f
	case "NoDaily":
		schedule.NoDaily = v == "true"
	case "Cont":
		schedule.ContinuousOpt = v == "true"
	case "Even":
		schedule.EvenOpt = v == "true"
	case "Util":
		schedule.Utilization = f
	}
}
