package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/schedule"
	"github.com/gitfleet/gitfleet/internal/schedule/feedplan"
	"github.com/gitfleet/gitfleet/internal/schedule/freshness"
)

// PolicyOptimal is the oracle: every repository checked periodically at the
// interval the theory gives for its true rate over the measured span,
// known in advance.
const PolicyOptimal = "optimal"

// With a feed (Options.FeedRequests > 0):
const (
	// FeedSuffix names a scheduler policy run beside a forge feed, as in
	// "adaptive+feed".
	FeedSuffix = "+feed"
	// FedSuffix names a scheduler policy run beside a forge feed that
	// also tells the scheduler which hosts the feed covers
	// (Scheduler.SetFed), as in "adaptive+fed": their background checks
	// are only a safety net, and the budget goes to the other hosts.
	FedSuffix = "+fed"
	// PolicyFeedOptimal is the oracle polling at the feed's rate:
	// every repository checked periodically at the theory's interval for
	// its true rate, the feed's budget spread as PolicyOptimal spreads
	// the check budget.
	PolicyFeedOptimal = "feed-optimal"
	// PolicyFeedUniform checks every repository in turn at the feed's
	// rate: uniform sweeps.
	PolicyFeedUniform = "feed-uniform"
)

// DefaultFeedBatch is the number of repositories a feed request asks
// about unless told otherwise: GitHub's GraphQL answers for 100.
const DefaultFeedBatch = 100

// DefaultMaxInterval is the staleness bound the simulator gives the
// scheduler unless told otherwise. It is longer than the node's default
// (24h) because at a budget of one check per repository per day or less,
// a 24h bound leaves a policy no choice: every repository must be checked
// every day and all policies are the same.
const DefaultMaxInterval = 7 * 24 * time.Hour

// Options says what to simulate.
type Options struct {
	// Policies to run: scheduler policies and PolicyOptimal. Default: all
	// of them.
	Policies []string
	// Budget is background checks an hour for the whole node; required.
	Budget float64
	// Start and End bound the measured span (zero: the trace's first and
	// last change). Changes before Start are history the policies may
	// learn from; at Start every mirror is up to date.
	Start, End  time.Time
	Concurrency int           // default: the scheduler's (checks are instant: it changes nothing)
	MaxInterval time.Duration // default DefaultMaxInterval
	MinInterval time.Duration // default: the scheduler's
	Seed        uint64        // seeds jitter and the oracle's phases
	// FeedRequests is the forge feed's requests an hour (0: no feed) and
	// FeedBatch the repositories a request asks about (default
	// DefaultFeedBatch). With a feed, the default policies are each
	// scheduler policy without and with the feed (P and P+FeedSuffix),
	// the oracle, and the two that poll at the feed's rate
	// (PolicyFeedOptimal and PolicyFeedUniform).
	FeedRequests float64
	FeedBatch    int
	// FeedHosts are the hosts the feed covers (empty: all). The others'
	// repositories are only polled; Result.UnfedFreshness is theirs.
	// With FeedHosts, the default policies include adaptive+fed.
	FeedHosts []string
	// FedMaxInterval is the scheduler's FedMaxInterval in P+fed runs
	// (default: the scheduler's).
	FedMaxInterval time.Duration
}

// Result is how one policy did.
type Result struct {
	Policy string
	// Freshness is the share of time a mirror equals its upstream,
	// averaged over repositories.
	Freshness float64
	// AgeSeconds is the mean, over time and repositories, of the time
	// since the oldest change the mirror does not have yet (0 when fresh).
	AgeSeconds float64
	Checks     int // checks made, urgent ones included
	Fetches    int // checks that found a change
	Asks       int // repositories the feed asked about
	Requests   int // requests the feed made (a batch of asks each)
	Urgent     int // checks the feed asked for: pushes newer than the last check
	// Unfed is the number of repositories on hosts the feed does not
	// cover (Options.FeedHosts), and UnfedFreshness their mean freshness
	// (0 if none).
	Unfed          int
	UnfedFreshness float64
}

// allPolicies is every policy Run knows, the oracle last.
var allPolicies = []string{
	schedule.PolicyAdaptive, schedule.PolicyFixed, schedule.PolicyCompass,
	schedule.PolicySourcegraph, PolicyOptimal,
}

// Run replays tr against each policy of opts and returns their results in
// the order asked.
func Run(tr *Trace, opts Options) ([]Result, error) {
	if !(opts.Budget > 0) {
		return nil, fmt.Errorf("sim: budget %v checks/hour: must be > 0", opts.Budget)
	}
	first, last := tr.Span()
	if opts.Start.IsZero() {
		opts.Start = first
	}
	if opts.End.IsZero() {
		opts.End = last
	}
	if !opts.End.After(opts.Start) {
		return nil, fmt.Errorf("sim: empty span %v to %v", opts.Start, opts.End)
	}
	if len(tr.Repos) == 0 {
		return nil, errors.New("sim: trace has no repository")
	}
	if opts.MaxInterval == 0 {
		opts.MaxInterval = DefaultMaxInterval
	}
	if opts.FeedRequests < 0 || math.IsNaN(opts.FeedRequests) || math.IsInf(opts.FeedRequests, 0) {
		return nil, fmt.Errorf("sim: feed budget %v requests/hour: must be a finite number >= 0 (0: no feed)", opts.FeedRequests)
	}
	if opts.FeedBatch < 0 {
		return nil, fmt.Errorf("sim: feed batch %d: must be >= 0 (0: %d)", opts.FeedBatch, DefaultFeedBatch)
	}
	if opts.FeedBatch == 0 {
		opts.FeedBatch = DefaultFeedBatch
	}
	if len(opts.FeedHosts) > 0 && opts.FeedRequests == 0 {
		return nil, fmt.Errorf("sim: feed hosts %v need a feed budget (--feed-budget)", opts.FeedHosts)
	}
	policies := opts.Policies
	if len(policies) == 0 {
		policies = allPolicies
	}
	policies = withFeeds(policies, opts.FeedRequests > 0, len(opts.FeedHosts) > 0, len(opts.Policies) == 0)
	out := make([]Result, 0, len(policies))
	for _, p := range policies {
		base, withFeed := strings.CutSuffix(p, FeedSuffix)
		base, fed := strings.CutSuffix(base, FedSuffix)
		withFeed = withFeed || fed
		if (withFeed || p == PolicyFeedOptimal || p == PolicyFeedUniform) && opts.FeedRequests == 0 {
			return nil, fmt.Errorf("sim: policy %s needs a feed budget (--feed-budget)", p)
		}
		var res Result
		var err error
		switch p {
		case PolicyOptimal:
			res = runOptimal(tr, opts, opts.Budget)
		case PolicyFeedOptimal:
			res = runOptimal(tr, opts, opts.feedPerHour())
		case PolicyFeedUniform:
			res = runUniform(tr, opts, opts.feedPerHour())
		default:
			res, err = runScheduler(tr, base, withFeed, fed, opts)
		}
		if err != nil {
			return nil, err
		}
		res.Policy = p
		out = append(out, res)
	}
	return out, nil
}

// feedPerHour is the repositories the feed asks about an hour.
func (o Options) feedPerHour() float64 { return o.FeedRequests * float64(o.FeedBatch) }

// withFeeds returns policies, each followed, with a feed, by its run with
// the feed (P+feed; adaptive+fed too when the feed covers some hosts),
// as the help promises for every policy named. The oracle has no feed run
// of its own; with all (every policy), the feed's two baselines close the
// list.
func withFeeds(policies []string, feed, feedHosts, all bool) []string {
	if !feed {
		return policies
	}
	var ps []string
	for _, p := range policies {
		ps = append(ps, p)
		if p == PolicyOptimal || p == PolicyFeedOptimal || p == PolicyFeedUniform ||
			strings.HasSuffix(p, FeedSuffix) || strings.HasSuffix(p, FedSuffix) {
			continue
		}
		if feedP := p + FeedSuffix; !slices.Contains(policies, feedP) {
			ps = append(ps, feedP)
		}
		if fedP := p + FedSuffix; p == schedule.PolicyAdaptive && feedHosts && !slices.Contains(policies, fedP) {
			ps = append(ps, fedP)
		}
	}
	if all {
		ps = append(ps, PolicyFeedOptimal, PolicyFeedUniform)
	}
	return ps
}

// covers says whether the feed covers host.
func (o Options) covers(host string) bool {
	return len(o.FeedHosts) == 0 || slices.Contains(o.FeedHosts, host)
}

// mirror follows one repository's mirror during a run.
type mirror struct {
	unfed   bool        // on a host the feed does not cover
	changes []time.Time // changes in the measured span
	pending int         // index of the oldest change not mirrored
	stale   float64     // seconds not up to date
	age     float64     // integral of the age, seconds^2
}

func newMirrors(tr *Trace, opts Options) []mirror {
	ms := make([]mirror, len(tr.Repos))
	for i, r := range tr.Repos {
		lo, _ := slices.BinarySearchFunc(r.Changes, opts.Start, time.Time.Compare)
		hi, _ := slices.BinarySearchFunc(r.Changes, opts.End, time.Time.Compare)
		ms[i].changes = r.Changes[lo:hi]
		ms[i].unfed = !opts.covers(hostOf(r.Key))
	}
	return ms
}

// check brings the mirror up to date at t and returns the changes it
// fetched.
func (m *mirror) check(t time.Time) []time.Time {
	q := m.pending
	for q < len(m.changes) && !m.changes[q].After(t) {
		q++
	}
	if q == m.pending {
		return nil
	}
	m.behind(t)
	fetched := m.changes[m.pending:q]
	m.pending = q
	return fetched
}

// behind accounts for the time from the oldest unmirrored change to t.
func (m *mirror) behind(t time.Time) {
	d := t.Sub(m.changes[m.pending]).Seconds()
	m.stale += d
	m.age += d * d / 2
}

func result(ms []mirror, opts Options, checks, fetches int) Result {
	span := opts.End.Sub(opts.Start).Seconds()
	res := Result{Checks: checks, Fetches: fetches}
	for i := range ms {
		m := &ms[i]
		if m.pending < len(m.changes) {
			m.behind(opts.End)
		}
		res.Freshness += 1 - m.stale/span
		res.AgeSeconds += m.age / span
		if m.unfed {
			res.Unfed++
			res.UnfedFreshness += 1 - m.stale/span
		}
	}
	if res.Unfed > 0 {
		res.UnfedFreshness /= float64(res.Unfed)
	}
	res.Freshness /= float64(len(ms))
	res.AgeSeconds /= float64(len(ms))
	return res
}

func hostOf(key string) string {
	h, _, _ := strings.Cut(key, "/")
	return h
}

// runScheduler replays tr against the scheduler with policy, and, with
// withFeed, a forge feed beside it, on the hosts of Options.FeedHosts
// (with fed, the scheduler is told so: SetFed): every 1/FeedRequests
// hours the feed planner picks FeedBatch of their repositories, the forge
// answers with each one's
// latest change at or before the ask (its pushedAt), the scheduler is told
// each push time, and a push newer than the repository's last check is an
// urgent check. An urgent check takes the webhook's path (Scheduler.Urgent:
// ahead of the background lane and outside its budget, at once, as checks
// take no time here); Result.Urgent counts them.
func runScheduler(tr *Trace, policy string, withFeed, fed bool, opts Options) (Result, error) {
	clk := clock.NewFake(opts.Start)
	s, err := schedule.New(schedule.Config{
		Policy:         policy,
		Budget:         opts.Budget,
		Concurrency:    opts.Concurrency,
		MaxInterval:    opts.MaxInterval,
		MinInterval:    opts.MinInterval,
		FedMaxInterval: opts.FedMaxInterval,
		Seed:           opts.Seed,
	}, clk)
	if err != nil {
		return Result{}, fmt.Errorf("sim: %w", err)
	}
	var fp *feedplan.Planner
	if withFeed {
		fp, err = feedplan.New(feedplan.Options{PerHour: opts.feedPerHour(), MaxInterval: opts.MaxInterval})
		if err != nil {
			return Result{}, fmt.Errorf("sim: %w", err)
		}
	}
	ms := newMirrors(tr, opts)
	index := make(map[string]int, len(tr.Repos)) // by the trace's key, as the feed plans it
	byKey := make(map[repokey.Key]int, len(tr.Repos))
	keys := make([]repokey.Key, len(tr.Repos))
	for i, r := range tr.Repos {
		// The scheduler takes only a repokey.Key: a trace's key is parsed
		// here, where it enters.
		k, err := repokey.Parse(r.Key)
		if err != nil {
			return Result{}, fmt.Errorf("sim: trace: %w", err)
		}
		keys[i] = k
		index[r.Key], byKey[k] = i, i
		lo, _ := slices.BinarySearchFunc(r.Changes, opts.Start, time.Time.Compare)
		st := schedule.RepoState{LastCheck: opts.Start, ChangeTimes: r.Changes[:lo], Cloned: true}
		if lo > 0 {
			st.LastChange = r.Changes[lo-1]
		}
		host := hostOf(r.Key)
		if fp == nil || !opts.covers(host) {
			s.Add(k, host, st)
			continue
		}
		if fed {
			s.SetFed(host, true) // once per host: it returns at once after the first
		}
		s.Add(k, host, st)
		fp.Add(r.Key, opts.Start, r.Changes[:lo])
	}
	asks, requests, urgent := 0, 0, 0
	ask := func(now time.Time) {
		fkeys := fp.Next(now, opts.FeedBatch)
		if len(fkeys) > 0 {
			requests++
		}
		for _, fk := range fkeys {
			asks++
			i := index[fk]
			key := keys[i]
			pushed := latest(tr.Repos[i].Changes, now)
			fp.Observe(fk, now, pushed)
			if fed {
				s.SetAnswered(key, true) // the simulated forge answers for every repository
			}
			if pushed.IsZero() {
				continue
			}
			s.ObservePush(key, pushed)
			if pushed.After(s.LastCheck(key)) {
				urgent++
				s.Urgent(key)
			}
		}
	}
	var askEvery time.Duration
	nextAsk := opts.End // never, without a feed
	if fp != nil {
		askEvery = time.Duration(float64(time.Hour) / opts.FeedRequests)
		nextAsk = opts.Start
	}
	checks, fetches := 0, 0
	for {
		key, ok, wait := s.Next()
		now := clk.Now()
		if ok {
			fetched := ms[byKey[key]].check(now)
			checks++
			if len(fetched) > 0 {
				fetches++
			}
			s.Done(key, schedule.Outcome{Changed: len(fetched) > 0, ChangeTimes: fetched, Fetched: len(fetched) > 0})
			continue
		}
		wake := now.Add(wait)
		if wait == 0 {
			wake = opts.End
		}
		if nextAsk.Before(opts.End) && !nextAsk.After(wake) {
			clk.Set(nextAsk)
			ask(nextAsk)
			nextAsk = nextAsk.Add(askEvery)
			continue
		}
		if !wake.Before(opts.End) {
			break
		}
		clk.Set(wake)
	}
	res := result(ms, opts, checks, fetches)
	res.Asks, res.Requests, res.Urgent = asks, requests, urgent
	return res, nil
}

// latest returns the latest of the sorted times ts at or before t (zero if
// none).
func latest(ts []time.Time, t time.Time) time.Time {
	i, found := slices.BinarySearchFunc(ts, t, time.Time.Compare)
	switch {
	case found:
		return ts[i]
	case i > 0:
		return ts[i-1]
	}
	return time.Time{}
}

// runOptimal checks each repository every x_i seconds, x_i being the
// theory's optimal interval for its true rate over the span, perHour
// checks an hour spread by equalising the marginal freshness gain. The
// oracle respects the budget but not MaxInterval: it is the bound of what
// periodic checks can do when rates are known.
func runOptimal(tr *Trace, opts Options, perHour float64) Result {
	ms := newMirrors(tr, opts)
	span := opts.End.Sub(opts.Start).Seconds()
	rates := make([]float64, len(ms))
	for i, m := range ms {
		rates[i] = float64(len(m.changes)) / span
	}
	demand := func(mu float64) float64 {
		var sum float64
		for _, l := range rates {
			sum += 1 / freshness.Interval(l, mu)
		}
		return sum
	}
	mu := freshness.Price(demand, perHour/3600, 0)
	intervals := make([]float64, len(ms))
	for i, l := range rates {
		intervals[i] = freshness.Interval(l, mu)
	}
	return periodic(ms, opts, intervals)
}

// runUniform checks every repository at the same interval, perHour checks
// an hour in all: uniform sweeps.
func runUniform(tr *Trace, opts Options, perHour float64) Result {
	ms := newMirrors(tr, opts)
	intervals := make([]float64, len(ms))
	for i := range intervals {
		intervals[i] = float64(len(ms)) / perHour * 3600
	}
	return periodic(ms, opts, intervals)
}

// periodic checks mirror i every intervals[i] seconds (never if +Inf),
// each at a fixed phase spread by the golden ratio.
func periodic(ms []mirror, opts Options, intervals []float64) Result {
	checks, fetches := 0, 0
	for i, x := range intervals {
		if math.IsInf(x, 1) {
			continue
		}
		_, phase := math.Modf(float64(i+1)*0.6180339887498949 + float64(opts.Seed%1000)/1000)
		step := time.Duration(x * 1e9)
		for t := opts.Start.Add(time.Duration(phase * float64(step))); t.Before(opts.End); t = t.Add(step) {
			checks++
			if len(ms[i].check(t)) > 0 {
				fetches++
			}
		}
	}
	return result(ms, opts, checks, fetches)
}
