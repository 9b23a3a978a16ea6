package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
)

// BenchmarkSim10k30d times a whole simulation: 10,000 repositories over 30
// days, every policy and the oracle, at one check per repository per day.
func BenchmarkSim10k30d(b *testing.B) {
	n := benchsize.Of(10000, 100)
	tr := Generate(KindWorkHours, n, 30, 1)
	for b.Loop() {
		start := time.Now()
		res, err := Run(tr, Options{Budget: float64(n) / 24})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/run")
		for _, r := range res {
			b.ReportMetric(1-r.Freshness, "stale-"+r.Policy)
		}
	}
}

// BenchmarkQuality replays the real trace (if present) and the synthetic
// ones at 0.5, 1 and 4 checks per repository per day and reports each
// policy's stale share (1 - freshness), and adaptive's against the best
// of fixed, compass and sourcegraph and against the oracle. The
// synthetic traces have 1,000 repositories over 90 days, the first 30 of
// which are history.
func BenchmarkQuality(b *testing.B) {
	type trace struct {
		name  string
		tr    *Trace
		start time.Time
	}
	var traces []trace
	if tr := githubTraceIfPresent(b); tr != nil {
		traces = append(traces, trace{"github-365d", tr, time.Time{}})
	}
	for _, kind := range []string{KindPoissonHeavyTail, KindWorkHours, KindBursty} {
		traces = append(traces, trace{kind, Generate(kind, benchsize.Of(1000, 100), benchsize.Of(90, 40), 1), epoch.Add(30 * 24 * time.Hour)})
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| trace | checks/repo/day | %s | adaptive / best baseline | adaptive / optimal |\n|---|--:|%s--:|--:|\n",
		strings.Join(allPolicies, " | "), strings.Repeat("--:|", len(allPolicies)))
	for _, tc := range traces {
		for _, perDay := range []float64{0.5, 1, 4} {
			b.Run(fmt.Sprintf("%s/%g", tc.name, perDay), func(b *testing.B) {
				var res []Result
				for b.Loop() {
					var err error
					res, err = Run(tc.tr, Options{Budget: perDay * float64(len(tc.tr.Repos)) / 24, Start: tc.start})
					if err != nil {
						b.Fatal(err)
					}
				}
				stale := map[string]float64{}
				row := fmt.Sprintf("| %s | %g |", tc.name, perDay)
				for _, r := range res {
					stale[r.Policy] = 1 - r.Freshness
					b.ReportMetric(1-r.Freshness, "stale-"+r.Policy)
					row += fmt.Sprintf(" %.4f |", 1-r.Freshness)
				}
				best := math.Min(stale["fixed"], math.Min(stale["compass"], stale["sourcegraph"]))
				b.ReportMetric(stale["adaptive"]/best, "adaptive/best")
				b.ReportMetric(stale["adaptive"]/stale[PolicyOptimal], "adaptive/optimal")
				fmt.Fprintf(&table, "%s %.3f | %.3f |\n", row, stale["adaptive"]/best, stale["adaptive"]/stale[PolicyOptimal])
			})
		}
	}
	b.Log(table.String())
}

// githubTraceIfPresent is the real trace, if present, and none under
// -short: a year of it is seconds a run.
func githubTraceIfPresent(b *testing.B) *Trace {
	if testing.Short() {
		return nil
	}
	var tr *Trace
	b.Run("read-github-trace", func(b *testing.B) { tr = githubTrace(b) })
	return tr
}

// BenchmarkFeedQuality replays the real trace (if present) and the
// synthetic ones (2,000 repositories over 90 days, the first 30 of which
// are history) at one check per repository per day plus a feed of one
// GitHub token's budget for a million repositories (each asked about every
// 2 hours on average: feedFor), and reports the stale share of the
// adaptive scheduler with the feed, of the oracle and uniform sweeps at
// the feed's rate, and of the scheduler without the feed.
func BenchmarkFeedQuality(b *testing.B) {
	var table strings.Builder
	table.WriteString("\n| trace | adaptive | adaptive+feed | feed-optimal | feed-uniform | +feed / feed-optimal |\n|---|--:|--:|--:|--:|--:|\n")
	for _, ft := range feedTraces(b, benchsize.Of(2000, 100), benchsize.Of(90, 40)) {
		b.Run(ft.name, func(b *testing.B) {
			requests, batch := feedFor(len(ft.tr.Repos))
			var res []Result
			for b.Loop() {
				var err error
				res, err = Run(ft.tr, Options{
					Policies:     []string{"adaptive", "adaptive" + FeedSuffix, PolicyFeedOptimal, PolicyFeedUniform},
					Budget:       float64(len(ft.tr.Repos)) / 24,
					Start:        ft.start,
					FeedRequests: requests,
					FeedBatch:    batch,
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			row := "| " + ft.name + " |"
			for _, r := range res {
				b.ReportMetric(1-r.Freshness, "stale-"+r.Policy)
				row += fmt.Sprintf(" %.4f |", 1-r.Freshness)
			}
			ratio := (1 - res[1].Freshness) / (1 - res[2].Freshness)
			b.ReportMetric(ratio, "feed/optimal")
			b.ReportMetric(float64(res[1].Urgent)/float64(res[1].Checks), "urgent/checks")
			fmt.Fprintf(&table, "%s %.3f |\n", row, ratio)
		})
	}
	b.Log(table.String())
}

// BenchmarkFedHosts replays the synthetic traces of BenchmarkFeedQuality
// with the feed on github.com alone (70% of the repositories; its budget as
// there, for all of them), and reports the stale share of the repositories
// of the other hosts, polled only: without the feed, with it, and with the
// scheduler told which hosts it covers (adaptive+fed), so that the budget
// their background checks no longer need goes to the others.
func BenchmarkFedHosts(b *testing.B) {
	var table strings.Builder
	table.WriteString("\n| trace | unfed: adaptive | adaptive+feed | adaptive+fed | fed: adaptive+feed | adaptive+fed |\n|---|--:|--:|--:|--:|--:|\n")
	for _, ft := range feedTraces(b, benchsize.Of(2000, 100), benchsize.Of(90, 40)) {
		if ft.name == "github-365d" {
			continue // one host: nothing to move the budget to
		}
		b.Run(ft.name, func(b *testing.B) {
			requests, batch := feedFor(len(ft.tr.Repos))
			var res []Result
			for b.Loop() {
				var err error
				res, err = Run(ft.tr, Options{
					Policies:     []string{"adaptive", "adaptive" + FeedSuffix, "adaptive" + FedSuffix},
					Budget:       float64(len(ft.tr.Repos)) / 24,
					Start:        ft.start,
					FeedRequests: requests,
					FeedBatch:    batch,
					FeedHosts:    []string{"github.com"},
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			row := "| " + ft.name + " |"
			for _, r := range res {
				b.ReportMetric(1-r.UnfedFreshness, "unfed-stale-"+r.Policy)
				row += fmt.Sprintf(" %.4f |", 1-r.UnfedFreshness)
			}
			for _, r := range res[1:] {
				fed := 1 - (r.Freshness*float64(len(ft.tr.Repos))-r.UnfedFreshness*float64(r.Unfed))/float64(len(ft.tr.Repos)-r.Unfed)
				b.ReportMetric(fed, "fed-stale-"+r.Policy)
				row += fmt.Sprintf(" %.4f |", fed)
			}
			fmt.Fprintln(&table, row)
		})
	}
	b.Log(table.String())
}
