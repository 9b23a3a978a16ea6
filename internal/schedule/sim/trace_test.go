package sim

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReadTrace(t *testing.T) {
	in := "b,200\na,300\n\nb,100\r\nc,\na, 50 \n"
	tr, err := ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(tr.Repos)
	want := fmt.Sprint([]Repo{
		{"a", []time.Time{time.Unix(50, 0).UTC(), time.Unix(300, 0).UTC()}},
		{"b", []time.Time{time.Unix(100, 0).UTC(), time.Unix(200, 0).UTC()}},
		{"c", nil},
	})
	if got != want {
		t.Errorf("ReadTrace = %s\nwant        %s", got, want)
	}
	first, last := tr.Span()
	if first.Unix() != 50 || last.Unix() != 300 {
		t.Errorf("Span() = %v, %v; want 50, 300", first.Unix(), last.Unix())
	}
}

func TestReadTraceRejectsBadLinesWithTheirNumber(t *testing.T) {
	tests := []struct {
		in   string
		line string
	}{
		{"a,1\nno comma\n", "line 2"},
		{"a,1\nb,2\n,3\n", "line 3"},
		{"a,12x\n", "line 1"},
		{"a,1,2\n", "line 1"},
		{"a,1.5\n", "line 1"},
		{"a,99999999999999999999\n", "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.line) {
				t.Errorf("ReadTrace(%q) error = %v, want one naming %s", tt.in, err, tt.line)
			}
		})
	}
}

func FuzzReadTrace(f *testing.F) {
	f.Add("github.com/a/b,1751423859\ngithub.com/a/c,\n")
	f.Add("x,1\nx,1\ny,-5\n")
	f.Add(",\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadTrace(strings.NewReader(in))
		if err != nil {
			return
		}
		if !slices.IsSortedFunc(tr.Repos, func(a, b Repo) int { return strings.Compare(a.Key, b.Key) }) {
			t.Errorf("repositories not sorted by key")
		}
		for _, r := range tr.Repos {
			if r.Key == "" {
				t.Errorf("empty key accepted")
			}
			if !slices.IsSortedFunc(r.Changes, time.Time.Compare) {
				t.Errorf("%s: changes not sorted", r.Key)
			}
		}
	})
}

func TestReadTraceOfTheRealGitHubTrace(t *testing.T) {
	tr := githubTrace(t)
	n := 0
	for _, r := range tr.Repos {
		n += len(r.Changes)
	}
	if len(tr.Repos) != 61 || n != 38427 {
		t.Errorf("github-365d.csv: %d repositories, %d changes; want 61, 38427", len(tr.Repos), n)
	}
}

// githubTrace reads the real trace, or skips the test if it is missing.
func githubTrace(tb testing.TB) *Trace {
	tb.Helper()
	f, err := os.Open("../../../../shared/data/traces/github-365d.csv") // ../shared beside the checkout
	if err != nil {
		tb.Skipf("real trace not available: %v", err)
	}
	defer f.Close()
	tr, err := ReadTrace(f)
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}

func TestGenerateIsDeterministic(t *testing.T) {
	for _, kind := range []string{KindPoissonHeavyTail, KindWorkHours, KindBursty, KindMixed} {
		a, b := Generate(kind, 50, 10, 3), Generate(kind, 50, 10, 3)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: two traces from seed 3 differ", kind)
		}
		if c := Generate(kind, 50, 10, 4); fmt.Sprint(a) == fmt.Sprint(c) {
			t.Errorf("%s: seeds 3 and 4 made the same trace", kind)
		}
	}
}

func TestGenerateKinds(t *testing.T) {
	const n, days = 300, 28
	end := epoch.Add(days * 24 * time.Hour)
	stats := func(tr *Trace) (counts []int, quickGaps, total int, maxHourSpan int) {
		for _, r := range tr.Repos {
			counts = append(counts, len(r.Changes))
			total += len(r.Changes)
			var hours [24]bool
			for i, c := range r.Changes {
				if c.Before(epoch) || !c.Before(end) {
					t.Fatalf("%s: change %v outside the trace's %d days", r.Key, c, days)
				}
				if i > 0 && c.Sub(r.Changes[i-1]) < time.Hour {
					quickGaps++
				}
				hours[c.Hour()] = true
			}
			maxHourSpan = max(maxHourSpan, longestCircularRun(hours))
		}
		slices.Sort(counts)
		return counts, quickGaps, total, maxHourSpan
	}

	counts, quick, total, _ := stats(Generate(KindPoissonHeavyTail, n, days, 1))
	if median, top := counts[n/2], counts[n-1]; top < 20*max(median, 1) {
		t.Errorf("poisson-heavytail: median %d, max %d changes: want a heavy tail", median, top)
	}
	poissonQuick := float64(quick) / float64(total)

	_, _, _, span := stats(Generate(KindWorkHours, n, days, 1))
	if span > 9 {
		t.Errorf("workhours: a repository changes over %d hours of the day, want at most 9", span)
	}

	_, quick, total, _ = stats(Generate(KindBursty, n, days, 1))
	if share := float64(quick) / float64(total); share < poissonQuick+0.2 {
		t.Errorf("bursty: %.0f%% of gaps under an hour, poisson-heavytail %.0f%%: want far more", 100*share, 100*poissonQuick)
	}
}

func TestGenerateMixedIsMostlyQuietWithAFewBusy(t *testing.T) {
	const n, days = 1000, 60
	busy, quiet := 0, 0
	for _, r := range Generate(KindMixed, n, days, 1).Repos {
		switch perDay := float64(len(r.Changes)) / days; {
		case perDay >= 0.5:
			busy++
		case perDay < 0.2:
			quiet++
		}
	}
	if quiet < n/2 || busy < n/5 || busy > n*2/5 {
		t.Errorf("mixed: %d of %d repositories quiet (under 0.2 changes a day), %d busy (0.5 or more); want most quiet and 20-40%% busy", quiet, n, busy)
	}
}

// longestCircularRun returns how many consecutive hours (around midnight
// too) cover all the hours set.
func longestCircularRun(hours [24]bool) int {
	// The complement's longest gap of unset hours.
	gap, best := 0, 0
	for i := range 48 {
		if hours[i%24] {
			gap = 0
			continue
		}
		gap++
		best = max(best, min(gap, 24))
	}
	return 24 - best
}

func TestGeneratePanicsOnUnknownKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Generate accepted an unknown kind")
		}
	}()
	Generate("sinusoidal", 1, 1, 1)
}
