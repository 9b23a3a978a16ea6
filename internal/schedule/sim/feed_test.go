package sim

import (
	"testing"
	"time"
)

// feedFor returns the feed of the target for n repositories: the
// budget of one GitHub token (5,000 requests of 100 an hour) spread over a
// million repositories, each asked about every 2 hours on average, that
// is n/2 repositories an hour. Batches are 100 from 2,000 repositories up,
// smaller below, so that a small trace is not asked about whole at once.
func feedFor(n int) (requests float64, batch int) {
	batch = min(DefaultFeedBatch, max(1, n/20))
	return float64(n) / 2 / float64(batch), batch
}

// feedTrace is a trace to measure the feed on, and where its measured
// span starts (zero: at its first change).
type feedTrace struct {
	name  string
	tr    *Trace
	start time.Time
}

// feedTraces returns the real trace if present and the synthetic ones of
// n repositories over days days, the first third of which is history.
func feedTraces(tb testing.TB, n, days int) []feedTrace {
	var out []feedTrace
	if tr := realTraceIfPresent(tb); tr != nil {
		out = append(out, feedTrace{"github-365d", tr, time.Time{}})
	}
	for _, kind := range []string{KindPoissonHeavyTail, KindWorkHours, KindBursty, KindMixed} {
		out = append(out, feedTrace{kind, Generate(kind, n, days, 1), epoch.Add(time.Duration(days/3) * 24 * time.Hour)})
	}
	return out
}

// realTraceIfPresent returns the real trace, or nil (without skipping the
// caller) if it is missing.
func realTraceIfPresent(tb testing.TB) *Trace {
	tb.Helper()
	switch tb := tb.(type) {
	case *testing.B:
		return githubTraceIfPresent(tb)
	case *testing.T:
		var tr *Trace
		tb.Run("read-github-trace", func(t *testing.T) { tr = githubTrace(t) })
		return tr
	}
	return nil
}

// feedStale runs the adaptive scheduler at one check per repository per
// day with the feed of feedFor, and the two baselines at the feed's rate,
// and returns their stale shares.
func feedStale(tb testing.TB, ft feedTrace) (feed, optimal, uniform float64) {
	tb.Helper()
	requests, batch := feedFor(len(ft.tr.Repos))
	res, err := Run(ft.tr, Options{
		Policies:     []string{"adaptive" + FeedSuffix, PolicyFeedOptimal, PolicyFeedUniform},
		Budget:       float64(len(ft.tr.Repos)) / 24,
		Start:        ft.start,
		FeedRequests: requests,
		FeedBatch:    batch,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return 1 - res[0].Freshness, 1 - res[1].Freshness, 1 - res[2].Freshness
}

func TestTheFeedComesNearTheOracleAtItsRate(t *testing.T) {
	for _, ft := range feedTraces(t, 300, 45) {
		t.Run(ft.name, func(t *testing.T) {
			feed, optimal, uniform := feedStale(t, ft)
			t.Logf("stale share: adaptive+feed %.4f, feed-optimal %.4f, feed-uniform %.4f", feed, optimal, uniform)
			if feed > 1.3*optimal {
				t.Errorf("adaptive+feed %.4f stale, over 1.3 x the oracle at the feed's rate (%.4f)", feed, optimal)
			}
			if feed >= uniform {
				t.Errorf("adaptive+feed %.4f stale, not below uniform sweeps at the feed's rate (%.4f)", feed, uniform)
			}
			if ft.name == KindMixed && feed > 0.02 {
				t.Errorf("adaptive+feed %.4f stale on a mixed population, want at most 0.02", feed)
			}
		})
	}
}

func TestAFeedPolicyWithoutAFeedIsRefused(t *testing.T) {
	tr := Generate(KindBursty, 10, 5, 1)
	for _, p := range []string{"adaptive" + FeedSuffix, PolicyFeedOptimal, PolicyFeedUniform} {
		if _, err := Run(tr, Options{Budget: 1, Policies: []string{p}}); err == nil {
			t.Errorf("%s ran without a feed budget", p)
		}
	}
}

func TestTheFeedsUrgentChecksAreItsNewPushes(t *testing.T) {
	// One repository pushed at 10:00 and 14:00, asked about every hour:
	// each push is an urgent check at the first ask after it, and the
	// mirror is stale from the push to that ask only.
	day := epoch
	tr := &Trace{Repos: []Repo{{"h/a", []time.Time{day.Add(10*time.Hour + 30*time.Minute), day.Add(14*time.Hour + 15*time.Minute)}}}}
	res, err := Run(tr, Options{
		Policies:     []string{"fixed" + FeedSuffix},
		Budget:       1.0 / 24,
		Start:        day,
		End:          day.Add(24 * time.Hour),
		MaxInterval:  48 * time.Hour,
		FeedRequests: 1,
		FeedBatch:    1,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	// An ask an hour, the first when it falls due (spread over its first
	// interval), not at the start.
	if r.Urgent != 2 || r.Asks < 23 || r.Asks > 24 {
		t.Errorf("%d urgent checks from %d asks, want 2 from 23 or 24", r.Urgent, r.Asks)
	}
	// The fixed policy's one check a day is due at the end of the day:
	// stale 30 + 45 minutes.
	if want := 1 - 75.0/(24*60); r.Freshness < want-1e-9 || r.Freshness > want+1e-9 {
		t.Errorf("freshness %.6f, want %.6f", r.Freshness, want)
	}
}

func TestTheBudgetOfFedHostsGoesToTheOthers(t *testing.T) {
	tr := Generate(KindMixed, 300, 45, 1)
	requests, batch := feedFor(len(tr.Repos))
	res, err := Run(tr, Options{
		Policies:     []string{"adaptive" + FeedSuffix, "adaptive" + FedSuffix},
		Budget:       float64(len(tr.Repos)) / 24,
		Start:        epoch.Add(15 * 24 * time.Hour),
		FeedRequests: requests,
		FeedBatch:    batch,
		FeedHosts:    []string{"github.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	feed, fed := res[0], res[1]
	if feed.Unfed != 90 {
		t.Fatalf("%d repositories off github.com, want 90 (30%%)", feed.Unfed)
	}
	fedStale := func(r Result) float64 {
		n := float64(len(tr.Repos))
		return 1 - (r.Freshness*n-r.UnfedFreshness*float64(r.Unfed))/(n-float64(r.Unfed))
	}
	t.Logf("unfed stale %.4f with the feed, %.4f with the budget moved; fed stale %.4f, %.4f",
		1-feed.UnfedFreshness, 1-fed.UnfedFreshness, fedStale(feed), fedStale(fed))
	if 1-fed.UnfedFreshness > 0.75*(1-feed.UnfedFreshness) {
		t.Errorf("the polled hosts' stale share went from %.4f to %.4f with the fed host's budget, want it cut by a quarter at least",
			1-feed.UnfedFreshness, 1-fed.UnfedFreshness)
	}
	if fedStale(fed) > 1.1*fedStale(feed)+0.002 {
		t.Errorf("the fed host's stale share went from %.4f to %.4f with its background checks rarer, want about the same (the feed keeps it fresh)",
			fedStale(feed), fedStale(fed))
	}
}

func TestFeedHostsNeedAFeed(t *testing.T) {
	if _, err := Run(Generate(KindBursty, 10, 5, 1), Options{Budget: 1, FeedHosts: []string{"github.com"}}); err == nil {
		t.Error("feed hosts accepted without a feed budget")
	}
}
