package sim

import (
	"fmt"
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
	cases = append(cases, sweepCase{"github", tr, time.Time{}})
	for _, k := range []string{KindPoissonHeavyTail, KindWorkHours, KindBursty} {
		cases = append(cases, sweepCase{k, Generate(k, 1000, 60, 1), epoch.Add(30 * 24 * time.Hour)})
	}
	return cases
}

func TestSweep(t *testing.T) {
	spec := os.Getenv("SWEEP") // name=v1,v2,...
	if spec == "" {
		t.Skip()
	}
	name, vals, _ := strings.Cut(spec, "=")
	cases := sweepCases(t)
	per := 1.0
	if s := os.Getenv("PER"); s != "" {
		per, _ = strconv.ParseFloat(s, 64)
	}
	for _, v := range strings.Split(vals, ",") {
		set(name, v)
		line := fmt.Sprintf("%s=%-8s", name, v)
		for _, c := range cases {
			res, err := Run(c.tr, Options{Policies: []string{"adaptive"}, Budget: per * float64(len(c.tr.Repos)) / 24, Start: c.start})
			if err != nil {
				t.Fatal(err)
			}
			line += fmt.Sprintf(" %s=%.4f", c.name[:5], 1-res[0].Freshness)
		}
		fmt.Println(line)
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
	case "Util":
		schedule.Utilization = f
	}
}
