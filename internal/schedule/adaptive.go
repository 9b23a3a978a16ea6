package schedule

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule/freshness"
)

// The adaptive policy.
//
// Each repository's changes are modelled from what the node sees (its
// history when added, then the change times each fetch reveals): a rate of
// change episodes and an hour-of-day profile, both decaying so that they
// follow a repository whose habits change (see estimate).
//
// The budget is spent as in Cho & Garcia-Molina (SIGMOD 2000): every check
// must buy at least mu seconds of freshness, one price for all
// repositories, so that the marginal gain of a check is the same
// everywhere; a repository that changes too often for any check to buy
// that much is checked rarely. mu starts from their closed form for
// Poisson sources (freshness.Price over a histogram of the rates) and is
// then corrected by feedback so that what is planned meets the budget.
//
// Real repositories are not Poisson: they change in office hours of some
// time zone. So each repository gets a daily schedule (every n days at
// one hour, or at k hours of each day) chosen under its model for the most
// freshness less the price of its checks: a check just after the
// repository's working day ends keeps it fresh all night.

// Allocation constants.
const (
	rateBinsPerOct = 8
	rateMinPerSec  = 1e-10 // slowest rate told apart: about once in 300 years
	rateBins       = 36 * rateBinsPerOct
	minResolve     = 64 // re-solve mu after max(minResolve, Len()/32) updates
)

// Feedback tuning (variables while tuning).
var (
	KappaGain    = 0.25 // share of the correction applied per full round of plans
	Utilization  = 1.0  // share of the budget planned: the rest absorbs clumps
	BacklogDrain = 24 * time.Hour
)

type adaptive struct {
	s       *Scheduler
	bins    [rateBins]int // repositories counted per rate bin
	mu      float64       // price of a check, in fresh-seconds
	updates int           // rate updates since mu was solved
	solved  bool
	// kappa scales the budget the closed-form allocation aims at, so
	// that the daily schedules actually planned meet the budget.
	kappa   float64
	replans int // plans made since the last correction
	// demand is the number of checks a day planned at each hour (UTC).
	demand [24]float64
}

func newAdaptive(s *Scheduler) *adaptive {
	return &adaptive{s: s, kappa: 1}
}

func rateBin(l float64) int {
	b := int(math.Floor(math.Log2(l/rateMinPerSec) * rateBinsPerOct))
	return min(max(b, 0), rateBins-1)
}

func binRate(b int) float64 {
	return rateMinPerSec * math.Exp2((float64(b)+0.5)/rateBinsPerOct)
}

func (p *adaptive) count(r *repo) {
	r.est.bin = rateBin(r.est.rate())
	p.bins[r.est.bin]++
	p.updates++
}

func (p *adaptive) uncount(r *repo) {
	if r.est.bin >= 0 {
		p.bins[r.est.bin]--
		r.est.bin = -1
		p.updates++
	}
}

func (p *adaptive) remove(r *repo) {
	p.uncount(r)
	p.setPlan(r, footprint{})
}

// setPlan records r's new daily schedule in the planned demand.
func (p *adaptive) setPlan(r *repo, f footprint) {
	r.est.plan.add(&p.demand, -1)
	f.add(&p.demand, 1)
	r.est.plan = f
}

func (p *adaptive) add(r *repo, st RepoState, now time.Time) {
	r.est.begin(st.ChangeTimes, st.LastChange, now)
	p.count(r)
}

func (p *adaptive) first(r *repo, _ time.Time) time.Duration {
	d := p.interval(r.est.rate())
	p.setPlan(r, evenly(d))
	return d
}

func (p *adaptive) next(r *repo, now time.Time, o Outcome) time.Time {
	if o.Class != None {
		return now
	}
	p.uncount(r)
	r.est.observe(now, o.ChangeTimes, o.Changed)
	p.count(r)
	due, f := p.plan(r, now)
	p.setPlan(r, f)
	p.replans++
	return due
}

func (*adaptive) ranks() bool { return false }

// plan returns r's next check after a check now, from the daily schedule
// that is best for it at the current prices, and that schedule's
// footprint.
func (p *adaptive) plan(r *repo, now time.Time) (time.Time, footprint) {
	l := r.est.rate()
	if AgeHack > 0 && !r.lastChange.IsZero() {
		age := now.Sub(r.lastChange).Hours() + 12
		l *= math.Pow(age/AgeRef, -AgeHack)
	}
	xd := p.interval(l)
	if !(p.mu > 0) || math.IsInf(p.mu, 1) || NoDaily {
		return now.Add(xd), evenly(xd)
	}
	var prof [24]float64
	r.est.dayProfile(&prof)
	c := p.s.cfg
	var around []time.Duration
	if ContinuousOpt {
		around = []time.Duration{xd * 4 / 5, xd, xd * 5 / 4}
	}
	best := newDay(l, &prof).choose(p.mu, c.MinInterval, c.MaxInterval, around)
	if DebugChoice != nil {
		switch {
		case best.every > 0:
			DebugChoice[fmt.Sprintf("every %v", best.every)]++
		case best.k > 0:
			DebugChoice[fmt.Sprintf("k=%d %v", best.k, best.hours[:best.k])]++
		default:
			DebugChoice[fmt.Sprintf("interval (%.1f of x)", float64(best.interval)/float64(xd))]++
		}
	}
	// The repository keeps its minute within the hour, so that those on
	// the same schedule do not all come due on the hour.
	offset := now.Sub(now.Truncate(time.Hour))
	switch {
	case best.every > 0:
		return nextInHours(now.Add(best.every-12*time.Hour), best.hours[:1], offset), best.footprint()
	case best.k > 0:
		return nextInHours(now.Add(c.MinInterval), best.hours[:best.k], offset), best.footprint()
	}
	return now.Add(best.interval), best.footprint()
}

// interval returns the closed-form check interval of a Poisson source of
// rate l at the current price.
func (p *adaptive) interval(l float64) time.Duration {
	if !p.solved || p.updates > max(minResolve, p.s.live/32) {
		p.solve()
	}
	c := p.s.cfg
	x := min(freshness.Interval(l, p.mu), c.MaxInterval.Seconds())
	return clampDuration(time.Duration(x*1e9), c.MinInterval, c.MaxInterval)
}

// solve corrects kappa by the plans made since the last call, and finds the price mu at which Poisson sources of the counted
// rates spend kappa times the budget.
func (p *adaptive) solve() {
	p.solved, p.updates = true, 0
	c := p.s.cfg
	if c.Budget == 0 {
		p.mu = 0
		return
	}
	budget := c.Budget / 3600
	var planned float64 // checks a second
	for _, d := range p.demand {
		planned += d / 86400
	}
	// Repositories due and waiting for the budget are demand too: count
	// them as if they had to be cleared in BacklogDrain.
	var backlog int
	for _, h := range p.s.hostList {
		backlog += h.ready.len()
	}
	planned += float64(backlog) / BacklogDrain.Seconds()
	if p.replans > 0 && planned > 0 {
		// Correct by a share of the plans made since the last correction:
		// a plan is only remade when its repository is checked.
		gain := KappaGain * min(1, float64(p.replans)/float64(p.s.live))
		p.kappa = min(max(p.kappa*math.Pow(Utilization*budget/planned, gain), 0.125), 8)
		p.replans = 0
	}
	minX, maxX := c.MinInterval.Seconds(), c.MaxInterval.Seconds()
	demand := func(mu float64) float64 {
		var sum float64
		for b, n := range p.bins {
			if n > 0 {
				sum += float64(n) / min(max(freshness.Interval(binRate(b), mu), minX), maxX)
			}
		}
		return sum
	}
	p.mu = freshness.Price(demand, budget*p.kappa, p.mu)
	if debugSolve {
		fmt.Printf("%s solve: live=%d budget=%.3g/h planned=%.3g/h backlog=%d kappa=%.3f mu=%.0f\n", p.s.clk.Now().Format(time.DateTime), p.s.live, budget*3600, planned*3600, backlog, p.kappa, p.mu)
	}
}

var debugSolve = os.Getenv("DEBUGSOLVE") != ""

var AgeHack = 0.0
var AgeRef = 48.0

var NoDaily = false

var ContinuousOpt = true

var DebugChoice map[string]int
