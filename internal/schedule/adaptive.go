package schedule

import (
	"math"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule/changerate"
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
// must buy mu seconds of freshness or more, one price for all
// repositories, so that the marginal gain of a check is the same
// everywhere; a repository that changes too often for a check to buy that
// much is checked rarely. mu comes from their closed form for Poisson
// sources (freshness.Price over a histogram of the rates), aimed at kappa
// times the budget, kappa being corrected by feedback so that the checks
// actually planned, and those waiting for the budget, meet the budget.
//
// The fed repositories (SetFed, SetAnswered) are left out: their rates are not
// in the histogram, each is planned one check a FedMaxInterval, and mu is
// solved for the budget less those checks.
//
// Real repositories are not Poisson: they change in the working hours of
// some time zone. So each repository gets a daily schedule (every n days
// at one hour, at k hours of each day, or every x) chosen under its model
// for the most freshness less the price of its checks: a check just after
// the repository's working day ends keeps it fresh all night.

const (
	// minResolve: mu is re-solved after max(minResolve, Len()/8) updates
	// of the rate histogram.
	minResolve = 64
	// kappaGain is the share of kappa's error corrected per round of
	// plans (every repository replanned once).
	kappaGain = 0.25
	// backlogDrain: repositories due but waiting for the budget count as
	// demand as if they had to be cleared in this time.
	backlogDrain = 24 * time.Hour
)

type adaptive struct {
	s       *Scheduler
	bins    changerate.Histogram // repositories counted by rate
	mu      float64              // price of a check, in fresh-seconds
	updates int                  // histogram updates since mu was solved
	solved  bool
	kappa   float64 // scales the budget mu is solved for
	planned float64 // checks a second of all the plans
	replans int     // plans made since kappa was corrected
}

func newAdaptive(s *Scheduler) *adaptive { return &adaptive{s: s, kappa: 1} }

func (p *adaptive) count(r *repo) {
	if r.fed() {
		return
	}
	r.est.bin = changerate.Bin(r.est.rate.Rate())
	p.bins.Add(r.est.bin)
	p.updates++
}

func (p *adaptive) uncount(r *repo) {
	if r.est.bin >= 0 {
		p.bins.Remove(r.est.bin)
		r.est.bin = -1
		p.updates++
	}
}

func (p *adaptive) remove(r *repo) {
	p.uncount(r)
	p.setPlan(r, 0)
}

// setPlan records that r is planned for perSecond checks a second.
func (p *adaptive) setPlan(r *repo, perSecond float64) {
	p.planned += perSecond - r.est.planned
	r.est.planned = perSecond
}

func (p *adaptive) add(r *repo, st RepoState, now time.Time) {
	r.est.begin(st.ChangeTimes, st.LastChange, now)
	p.count(r)
}

// fedPlan is the checks a second planned for a repository of a fed host.
func (p *adaptive) fedPlan() float64 { return 1 / p.s.cfg.FedMaxInterval.Seconds() }

func (p *adaptive) repoFed(r *repo) {
	if r.fed() {
		p.uncount(r)
		p.setPlan(r, p.fedPlan())
	} else {
		p.count(r) // and the scheduler calls first, which plans it
	}
	p.solved = false // the budget left to the others changed
}

func (p *adaptive) first(r *repo, _ time.Time) time.Duration {
	if r.fed() {
		p.setPlan(r, p.fedPlan())
		return p.s.cfg.FedMaxInterval
	}
	d := p.interval(r.est.rate.Rate())
	p.setPlan(r, 1/d.Seconds())
	return d
}

func (p *adaptive) next(r *repo, now time.Time, o Outcome) time.Time {
	if o.Class != None {
		return now
	}
	p.uncount(r)
	// A change a push told of was counted then: a check that finds it
	// without telling when it happened must not count it again.
	r.est.observe(now, o.ChangeTimes, o.Changed && !r.told)
	p.count(r)
	if r.fed() {
		p.setPlan(r, p.fedPlan())
		return now.Add(p.s.cfg.FedMaxInterval)
	}
	due, perDay := p.plan(r, now)
	p.setPlan(r, perDay/daySeconds)
	p.replans++
	return due
}

func (p *adaptive) push(r *repo, at, now time.Time, checked bool) {
	if checked {
		r.est.rate.Know(at)
		return
	}
	r.est.observe(now, []time.Time{at}, false)
	// Pushes come far more often than checks: only a move to another
	// rate bin counts as an update of the histogram.
	if r.est.bin != changerate.Bin(r.est.rate.Rate()) {
		p.uncount(r)
		p.count(r)
	}
}

func (*adaptive) ranks() bool { return false }

// plan returns r's next check after a check now, from the daily schedule
// best for it at the current price, and how many checks a day that
// schedule makes.
func (p *adaptive) plan(r *repo, now time.Time) (time.Time, float64) {
	l := r.est.rate.Rate()
	x := p.interval(l)
	c := p.s.cfg
	if !(p.mu > 0) || math.IsInf(p.mu, 1) {
		return now.Add(x), daySeconds / x.Seconds()
	}
	var prof [24]float64
	r.est.dayProfile(&prof)
	var d day
	d.init(l, &prof)
	best := d.choose(p.mu, c.MinInterval, c.MaxInterval, x)
	// The repository keeps its minute within the hour, so that those on
	// the same schedule do not all come due on the hour.
	offset := now.Sub(now.Truncate(time.Hour))
	switch {
	case best.every > 0:
		return nextInHours(now.Add(best.every-12*time.Hour), best.hours[:1], offset), best.perDay()
	case best.k > 0:
		return nextInHours(now.Add(c.MinInterval), best.hours[:best.k], offset), best.perDay()
	}
	return now.Add(best.interval), best.perDay()
}

// interval returns the closed-form check interval of a Poisson source of
// rate l at the current price, within [MinInterval, MaxInterval].
func (p *adaptive) interval(l float64) time.Duration {
	if !p.solved || p.updates > max(minResolve, p.s.live/8) {
		p.solve()
	}
	c := p.s.cfg
	x := min(freshness.Interval(l, p.mu), c.MaxInterval.Seconds())
	return clampDuration(time.Duration(x*1e9), c.MinInterval, c.MaxInterval)
}

// solve corrects kappa by the plans made since the last call, and finds
// the price mu at which Poisson sources of the counted rates spend kappa
// times the budget.
func (p *adaptive) solve() {
	p.solved, p.updates = true, 0
	c := p.s.cfg
	if c.Budget == 0 {
		p.mu = 0
		return
	}
	// The safety net of the fed hosts' repositories comes first; the
	// rest of the budget is the others', and kappa is about theirs.
	fedRate := float64(p.s.fedLive) / c.FedMaxInterval.Seconds()
	budget := c.Budget/3600 - fedRate
	unfed := p.s.live - p.s.fedLive
	if p.replans > 0 && p.planned > fedRate && budget > 0 && unfed > 0 {
		var backlog int
		for _, h := range p.s.hostList {
			backlog += h.ready.len()
		}
		demand := p.planned - fedRate + float64(backlog)/backlogDrain.Seconds()
		// A plan is only remade when its repository is checked: correct
		// by the share of the plans remade since the last correction.
		gain := kappaGain * min(1, float64(p.replans)/float64(unfed))
		p.kappa = min(max(p.kappa*math.Pow(budget/demand, gain), 1.0/8), 8)
		p.replans = 0
	}
	p.mu = p.bins.Price(max(budget, 0)*p.kappa, c.MinInterval.Seconds(), c.MaxInterval.Seconds(), p.mu)
}
