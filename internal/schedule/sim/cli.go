package sim

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

const usage = `Usage: gitfleet sim schedule --trace FILE --budget N [--feed-budget R [--feed-batch B]
       [--feed-hosts H,... [--fed-max-interval D]]] [--policy P|all] [--start UNIX] [--end UNIX] [--max-interval D] [--json]

Replays a trace of upstream changes (CSV lines "key,unix_seconds"; a line
"key," declares a repository that never changes) against the scheduler's
policies with a simulated clock, and prints for each policy the mean
freshness (share of time a mirror equals its upstream), the mean age (time
since the oldest change not yet mirrored) and the checks used. --budget is
in checks per hour for the whole node. Changes before --start are history
the policies learn from; at --start every mirror is current.
Policies: adaptive, fixed, compass, sourcegraph, optimal (the theory's
oracle, which knows each repository's rate in advance), or all.

--feed-budget adds a forge's change feed: R requests an hour, each asking
about B repositories (--feed-batch, default 100) when each was last pushed,
chosen by the feed planner. The scheduler is told the push times, and a
push newer than a repository's last check is checked at once, outside the
check budget, as a webhook is. Each policy P then also runs as P+feed, and
two baselines poll at the feed's rate (R x B checks an hour): feed-optimal
(the oracle) and feed-uniform (every repository in turn). Checks count the
urgent ones, shown apart.

--feed-hosts limits the feed to the repositories of those hosts; the others
are only polled, and their stale share is shown apart ("unfed stale").
adaptive+fed then runs too: the feed, and the scheduler told which hosts it
covers, so that their background checks are only a safety net every
--fed-max-interval (default: the scheduler's, 7 days or --max-interval)
and the budget goes to the other hosts.
`

// Main implements `gitfleet sim schedule` (args follow "schedule").
func Main(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gitfleet sim schedule", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	tracePath := fs.String("trace", "", "trace file (CSV)")
	budget := fs.Float64("budget", 0, "background checks per hour for the whole node")
	policy := fs.String("policy", "all", "policy to run, or all")
	start := fs.Int64("start", 0, "start of the measured span (unix seconds; default: the first change)")
	end := fs.Int64("end", 0, "end of the measured span (unix seconds; default: the last change)")
	maxInterval := fs.Duration("max-interval", DefaultMaxInterval, "the longest a repository may go unchecked (or unasked by the feed)")
	feedBudget := fs.Float64("feed-budget", 0, "forge feed requests per hour (0: no feed)")
	feedBatch := fs.Int("feed-batch", DefaultFeedBatch, "repositories a feed request asks about")
	feedHosts := fs.String("feed-hosts", "", "hosts the feed covers, comma-separated (default: all)")
	fedMax := fs.Duration("fed-max-interval", 0, "the longest a repository of a fed host may go without a background check (0: the scheduler's default)")
	asJSON := fs.Bool("json", false, "one JSON object per line and policy")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *tracePath == "" || *budget <= 0 || fs.NArg() > 0 {
		fmt.Fprint(stderr, "gitfleet sim schedule: --trace and a positive --budget are required\n\n"+usage)
		return 2
	}
	if *feedBudget < 0 || *feedBatch <= 0 {
		fmt.Fprint(stderr, "gitfleet sim schedule: --feed-budget must be >= 0 and --feed-batch > 0\n\n"+usage)
		return 2
	}
	f, err := os.Open(*tracePath)
	if err != nil {
		fmt.Fprintln(stderr, "gitfleet sim schedule:", err)
		return 1
	}
	tr, err := ReadTrace(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "gitfleet sim schedule: %s: %v\n", *tracePath, err)
		return 1
	}
	opts := Options{Budget: *budget, MaxInterval: *maxInterval, FeedRequests: *feedBudget, FeedBatch: *feedBatch, FedMaxInterval: *fedMax}
	if *feedHosts != "" {
		opts.FeedHosts = strings.Split(*feedHosts, ",")
	}
	unfed := len(opts.FeedHosts) > 0
	if *policy != "all" {
		opts.Policies = strings.Split(*policy, ",")
	}
	if *start != 0 {
		opts.Start = time.Unix(*start, 0)
	}
	if *end != 0 {
		opts.End = time.Unix(*end, 0)
	}
	began := time.Now()
	results, err := Run(tr, opts)
	if err != nil {
		fmt.Fprintln(stderr, "gitfleet sim schedule:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			obj := map[string]any{"policy": r.Policy, "freshness": r.Freshness, "stale_share": 1 - r.Freshness,
				"age_seconds": r.AgeSeconds, "checks": r.Checks, "fetches": r.Fetches}
			if *feedBudget > 0 {
				obj["feed_asks"], obj["feed_requests"], obj["urgent_checks"] = r.Asks, r.Requests, r.Urgent
			}
			if unfed {
				obj["unfed_repositories"], obj["unfed_stale_share"] = r.Unfed, 1-r.UnfedFreshness
			}
			_ = enc.Encode(obj)
		}
		return 0
	}
	first, last := tr.Span()
	fmt.Fprintf(stdout, "%d repositories, %s to %s, budget %.1f checks/hour", len(tr.Repos),
		first.UTC().Format(time.DateOnly), last.UTC().Format(time.DateOnly), *budget)
	if *feedBudget > 0 {
		fmt.Fprintf(stdout, ", feed %g requests/hour of %d (%.1f repositories/hour)", *feedBudget, *feedBatch, *feedBudget*float64(*feedBatch))
	}
	if unfed && len(results) > 0 {
		fmt.Fprintf(stdout, " on %s; %d repositories on other hosts", *feedHosts, results[0].Unfed)
	}
	fmt.Fprint(stdout, "\n\n")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "policy\tfreshness\tstale share\tmean age\tchecks\tfetches\t"
	if *feedBudget > 0 {
		header += "feed asks\tfeed requests\turgent checks\t"
	}
	if unfed {
		header += "unfed stale\t"
	}
	fmt.Fprintln(tw, header)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%s\t%d\t%d\t", r.Policy, r.Freshness, 1-r.Freshness,
			(time.Duration(r.AgeSeconds) * time.Second).Round(time.Second), r.Checks, r.Fetches)
		if *feedBudget > 0 {
			fmt.Fprintf(tw, "%d\t%d\t%d\t", r.Asks, r.Requests, r.Urgent)
		}
		if unfed {
			fmt.Fprintf(tw, "%.4f\t", 1-r.UnfedFreshness)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\n(simulated in %s)\n", time.Since(began).Round(time.Millisecond))
	return 0
}
