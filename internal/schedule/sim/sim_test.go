package sim

import (
	"math"
	"strings"
	"testing"
	"time"
)

func at(sec int64) time.Time { return time.Unix(sec, 0).UTC() }

func TestMirrorAccountsStaleTimeAndAge(t *testing.T) {
	// Changes at 10 and 20, checks at 15 and 30, span 0 to 40: stale
	// from 10 to 15 and from 20 to 30; age integrates to 5²/2 + 10²/2.
	m := mirror{changes: []time.Time{at(10), at(20)}}
	if got := m.check(at(15)); len(got) != 1 || !got[0].Equal(at(10)) {
		t.Errorf("check at 15 fetched %v, want [10]", got)
	}
	if got := m.check(at(17)); got != nil {
		t.Errorf("check at 17 fetched %v, want nothing", got)
	}
	m.check(at(30))
	res := result([]mirror{m}, Options{Start: at(0), End: at(40)}, 0, 0)
	if want := 1 - 15.0/40; math.Abs(res.Freshness-want) > 1e-12 {
		t.Errorf("Freshness = %v, want %v", res.Freshness, want)
	}
	if want := (12.5 + 50) / 40; math.Abs(res.AgeSeconds-want) > 1e-12 {
		t.Errorf("AgeSeconds = %v, want %v", res.AgeSeconds, want)
	}
}

func TestMirrorNeverCheckedIsStaleFromItsFirstChange(t *testing.T) {
	ms := []mirror{{changes: []time.Time{at(30), at(35)}}, {}}
	res := result(ms, Options{Start: at(0), End: at(40)}, 0, 0)
	// (30/40 + 1) / 2 repositories.
	if want := (30.0/40 + 1) / 2; math.Abs(res.Freshness-want) > 1e-12 {
		t.Errorf("Freshness = %v, want %v", res.Freshness, want)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	tr := &Trace{Repos: []Repo{{"h/a", []time.Time{at(0), at(100)}}}}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no budget", Options{}, "budget"},
		{"empty span", Options{Budget: 1, Start: at(50), End: at(50)}, "span"},
		{"unknown policy", Options{Budget: 1, Policies: []string{"lifo"}}, "lifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Run(tr, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run error = %v, want one about %s", err, tt.want)
			}
		})
	}
}

func TestRunSpendsTheBudget(t *testing.T) {
	tr := Generate(KindPoissonHeavyTail, 200, 20, 1)
	start := epoch.Add(10 * 24 * time.Hour)
	res, err := Run(tr, Options{Budget: 200.0 / 24, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	_, last := tr.Span()
	want := 200.0 / 24 * last.Sub(start).Hours()
	for _, r := range res {
		if r.Checks > int(want*1.01)+10 {
			t.Errorf("%s: %d checks, over the budget of %.0f", r.Policy, r.Checks, want)
		}
		if r.Policy != "adaptive" && r.Checks < int(want*0.97) {
			// adaptive may leave checks that would buy nothing
			t.Errorf("%s: %d checks, want the budget of %.0f spent", r.Policy, r.Checks, want)
		}
		if r.Freshness <= 0 || r.Freshness > 1 || r.AgeSeconds < 0 || r.Fetches > r.Checks {
			t.Errorf("%s: implausible result %+v", r.Policy, r)
		}
	}
}

func TestAdaptiveKeepsOfficeHoursRepositoriesFresherThanFixed(t *testing.T) {
	tr := Generate(KindWorkHours, 300, 40, 2)
	res, err := Run(tr, Options{
		Policies: []string{"adaptive", "fixed", PolicyOptimal},
		Budget:   300.0 / 24,
		Start:    epoch.Add(20 * 24 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	adaptive, fixed, optimal := 1-res[0].Freshness, 1-res[1].Freshness, 1-res[2].Freshness
	if adaptive > 0.85*fixed || adaptive > optimal {
		t.Errorf("stale share: adaptive %.4f, fixed %.4f, optimal %.4f; want adaptive under 85%% of fixed and under optimal", adaptive, fixed, optimal)
	}
}
