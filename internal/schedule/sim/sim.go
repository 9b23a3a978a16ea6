package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/schedule"
	"github.com/gitfleet/gitfleet/internal/schedule/freshness"
)

// PolicyOptimal is the oracle: every repository checked periodically at the
// interval the theory gives for its true rate over the measured span,
// known in advance.
const PolicyOptimal = "optimal"

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
	Checks     int // checks made
	Fetches    int // checks that found a change
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
	policies := opts.Policies
	if len(policies) == 0 {
		policies = allPolicies
	}
	out := make([]Result, 0, len(policies))
	for _, p := range policies {
		var res Result
		var err error
		if p == PolicyOptimal {
			res = runOptimal(tr, opts)
		} else {
			res, err = runScheduler(tr, p, opts)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// mirror follows one repository's mirror during a run.
type mirror struct {
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

func result(policy string, ms []mirror, opts Options, checks, fetches int) Result {
	span := opts.End.Sub(opts.Start).Seconds()
	res := Result{Policy: policy, Checks: checks, Fetches: fetches}
	for i := range ms {
		m := &ms[i]
		if m.pending < len(m.changes) {
			m.behind(opts.End)
		}
		res.Freshness += 1 - m.stale/span
		res.AgeSeconds += m.age / span
	}
	res.Freshness /= float64(len(ms))
	res.AgeSeconds /= float64(len(ms))
	return res
}

func hostOf(key string) string {
	h, _, _ := strings.Cut(key, "/")
	return h
}

func runScheduler(tr *Trace, policy string, opts Options) (Result, error) {
	clk := clock.NewFake(opts.Start)
	s, err := schedule.New(schedule.Config{
		Policy:      policy,
		Budget:      opts.Budget,
		Concurrency: opts.Concurrency,
		MaxInterval: opts.MaxInterval,
		MinInterval: opts.MinInterval,
		Seed:        opts.Seed,
	}, clk)
	if err != nil {
		return Result{}, fmt.Errorf("sim: %w", err)
	}
	ms := newMirrors(tr, opts)
	index := make(map[string]int, len(tr.Repos))
	for i, r := range tr.Repos {
		index[r.Key] = i
		lo, _ := slices.BinarySearchFunc(r.Changes, opts.Start, time.Time.Compare)
		st := schedule.RepoState{LastCheck: opts.Start, ChangeTimes: r.Changes[:lo], Cloned: true}
		if lo > 0 {
			st.LastChange = r.Changes[lo-1]
		}
		s.Add(r.Key, hostOf(r.Key), st)
	}
	checks, fetches := 0, 0
	for {
		key, ok, wait := s.Next()
		now := clk.Now()
		if ok {
			fetched := ms[index[key]].check(now)
			checks++
			if len(fetched) > 0 {
				fetches++
			}
			s.Done(key, schedule.Outcome{Changed: len(fetched) > 0, ChangeTimes: fetched, Fetched: len(fetched) > 0})
			continue
		}
		if wait == 0 {
			break
		}
		t := now.Add(wait)
		if !t.Before(opts.End) {
			break
		}
		clk.Set(t)
	}
	return result(policy, ms, opts, checks, fetches), nil
}

// runOptimal checks each repository every x_i seconds, x_i being the
// theory's optimal interval for its true rate over the span, the budget
// spread by equalising the marginal freshness gain. The oracle respects
// the budget but not MaxInterval: it is the bound of what periodic checks
// can do when rates are known.
func runOptimal(tr *Trace, opts Options) Result {
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
	mu := freshness.Price(demand, opts.Budget/3600, 0)
	checks, fetches := 0, 0
	for i := range ms {
		x := freshness.Interval(rates[i], mu)
		if math.IsInf(x, 1) {
			continue
		}
		// A fixed phase per repository, spread by the golden ratio.
		_, phase := math.Modf(float64(i+1)*0.6180339887498949 + float64(opts.Seed%1000)/1000)
		step := time.Duration(x * 1e9)
		for t := opts.Start.Add(time.Duration(phase * float64(step))); t.Before(opts.End); t = t.Add(step) {
			checks++
			if len(ms[i].check(t)) > 0 {
				fetches++
			}
		}
	}
	return result(PolicyOptimal, ms, opts, checks, fetches)
}
