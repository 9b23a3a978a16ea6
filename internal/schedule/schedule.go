// Package schedule is the freshness scheduler of a node: it decides which
// mirrored repository to check upstream next.
//
// It owns the per-repository schedule (next due time, failure counters,
// what the policy has learned of each repository's changes, from its checks
// and from the push times a forge's feed reports: ObservePush), the node's
// background budget, per-host rate limits and host backoff, and the urgent
// lane (webhooks, on-demand fetches, new clones), which goes ahead of the
// background lane and outside the budget. The background lane is ordered
// by a policy: adaptive (the default, see adaptive.go), fixed, compass or
// sourcegraph; failure backoff, lanes, budget, host limits and
// MaxInterval are the same for all. Outside the volunteer's active hours
// (Config.Hours, package hours) no background check starts; urgent ones
// do, unless the volunteer declines them too. The fed repositories, of a
// host whose forge feed works (SetFed) and that the feed answered for
// lately (SetAnswered; fed.go), are left to the feed: their background
// checks are only a safety net every FedMaxInterval, and the adaptive
// policy spends the budget on the others.
//
// It is pure logic: it must not run git, touch the disk or the network,
// start goroutines, or read the wall clock. Time comes only from the
// injected clock.Clock; the node daemon runs the checks, reports their
// outcomes with Done, and persists Snapshot.
package schedule

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/hours"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Policy names accepted in Config.Policy.
const (
	PolicyAdaptive    = "adaptive"
	PolicyFixed       = "fixed"
	PolicyCompass     = "compass"
	PolicySourcegraph = "sourcegraph"
)

// Config configures a Scheduler. The zero value is usable: every zero
// field takes its default.
type Config struct {
	// Policy is "adaptive" (default), "fixed", "compass" or "sourcegraph".
	Policy string
	// Budget is the number of background checks an hour for the whole
	// node; 0 means unlimited. Urgent checks are not counted. Without a
	// budget, fixed and adaptive check every repository every MinInterval,
	// as fast as Concurrency allows: adaptive needs a budget to allocate.
	Budget float64
	// Concurrency is the most checks running at once (default 10).
	Concurrency int
	// MaxInterval is the staleness bound (default 24h): a repository is
	// due again at most this long after its last successful check, and
	// one that is past it goes ahead of every other background check. A
	// failing repository follows its retry delay instead. When the budget
	// is smaller than Len()/MaxInterval the bound cannot hold: the budget
	// wins.
	MaxInterval time.Duration
	// MinInterval is the shortest time between two background checks of
	// one repository (default 1m).
	MinInterval time.Duration
	// FedMaxInterval replaces MaxInterval for the fed repositories (of a
	// host whose forge feed works, SetFed, that the feed answered for
	// lately, SetAnswered): the feed asks for their checks, so
	// a background check comes only this long after the last successful
	// one (default 7 days, or MaxInterval if longer; not shorter than
	// MaxInterval).
	FedMaxInterval time.Duration
	// ArchivedInterval replaces MaxInterval for the repositories the
	// forge marks archived (SetArchived): read-only upstreams, checked
	// this long after their last successful check (default 30 days; not
	// shorter than MaxInterval). Urgent checks come as for any other.
	ArchivedInterval time.Duration
	// HostLimits caps checks an hour per upstream host, urgent or not.
	HostLimits map[string]float64
	// HostConcurrency caps the checks running at once against one
	// upstream host, urgent or not (0: no cap beyond Concurrency), so
	// that a node's fetchers never all hit one small git server.
	HostConcurrency int
	// Hours are the node's active hours (nil: always active): outside
	// them no background check starts. Urgent checks (first clones,
	// checks asked for) still do, unless DeclineUrgent.
	Hours *hours.Window
	// DeclineUrgent makes urgent checks wait for Hours too.
	DeclineUrgent bool
	// Seed seeds the jitter of the backoffs.
	Seed uint64
}

// DefaultConcurrency is how many checks run at once when Config leaves
// it 0 (config.DefaultFetchers is this).
const DefaultConcurrency = 10

const (
	defaultMaxInterval = 24 * time.Hour
	defaultMinInterval = time.Minute
	defaultFedMax      = 7 * 24 * time.Hour
	// DefaultArchivedInterval is ArchivedInterval's default.
	DefaultArchivedInterval = 30 * 24 * time.Hour
)

func (c Config) withDefaults() (Config, error) {
	if c.Policy == "" {
		c.Policy = PolicyAdaptive
	}
	switch c.Policy {
	case PolicyAdaptive, PolicyFixed, PolicyCompass, PolicySourcegraph:
	default:
		return c, fmt.Errorf("schedule: unknown policy %q (want adaptive, fixed, compass or sourcegraph)", c.Policy)
	}
	if c.Budget < 0 || math.IsNaN(c.Budget) || math.IsInf(c.Budget, 0) {
		return c, fmt.Errorf("schedule: budget %v checks/hour: must be a finite number >= 0 (0 = unlimited)", c.Budget)
	}
	if c.Concurrency < 0 {
		return c, fmt.Errorf("schedule: concurrency %d: must be >= 0 (0 = default %d)", c.Concurrency, DefaultConcurrency)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.HostConcurrency < 0 {
		return c, fmt.Errorf("schedule: host concurrency %d: must be >= 0 (0 = no cap)", c.HostConcurrency)
	}
	if c.MaxInterval < 0 || c.MinInterval < 0 {
		return c, fmt.Errorf("schedule: intervals must be >= 0 (min %v, max %v)", c.MinInterval, c.MaxInterval)
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = defaultMaxInterval
	}
	if c.MinInterval == 0 {
		c.MinInterval = defaultMinInterval
	}
	if c.MinInterval > c.MaxInterval {
		return c, fmt.Errorf("schedule: min interval %v is longer than max interval %v", c.MinInterval, c.MaxInterval)
	}
	if c.FedMaxInterval == 0 {
		c.FedMaxInterval = max(defaultFedMax, c.MaxInterval)
	}
	if c.FedMaxInterval < c.MaxInterval {
		return c, fmt.Errorf("schedule: fed max interval %v is shorter than max interval %v (0 = default %v)", c.FedMaxInterval, c.MaxInterval, defaultFedMax)
	}
	if c.ArchivedInterval == 0 {
		c.ArchivedInterval = max(DefaultArchivedInterval, c.MaxInterval)
	}
	if c.ArchivedInterval < c.MaxInterval {
		return c, fmt.Errorf("schedule: archived interval %v is shorter than max interval %v (0 = default %v)", c.ArchivedInterval, c.MaxInterval, DefaultArchivedInterval)
	}
	for h, l := range c.HostLimits {
		if !(l > 0) || math.IsInf(l, 0) {
			return c, fmt.Errorf("schedule: host limit for %q is %v checks/hour: must be a finite number > 0", h, l)
		}
	}
	return c, nil
}

// RepoState is what the node knows of a repository when it adds it.
type RepoState struct {
	// LastCheck is the last successful check (zero if unknown).
	LastCheck time.Time
	// LastChange is when the upstream last moved, as far as the mirror
	// knows (zero if unknown).
	LastChange time.Time
	// ChangeTimes is the known history of changes (commit or ref update
	// times, any order; the scheduler does not keep the slice); it may be
	// empty.
	ChangeTimes []time.Time
	// Cloned is false for a repository that has no mirror yet: it goes to
	// the urgent lane.
	Cloned bool
}

// Outcome is the result of one check, reported with Done.
type Outcome struct {
	// Changed is true when the upstream's refs differed from the mirror's.
	Changed bool
	// Class is None for a successful check, else why it failed.
	Class FailureClass
	// ChangeTimes are the commit or ref update times newly seen by this
	// check; it may be empty even when Changed is true.
	ChangeTimes []time.Time
	// Fetched is true when objects were fetched (or cloned).
	Fetched bool
	// HostThrottled is true when the host answered 429/503 or refused the
	// connection: the whole host backs off.
	HostThrottled bool
	// RetryAfter is what a throttling host asked for (Retry-After): the
	// host waits at least that long, up to MaxRetryAfter, beyond its own
	// backoff's cap.
	RetryAfter time.Duration
}

// Stats is a snapshot of the scheduler's counters and queues.
type Stats struct {
	Checks   int                  // checks finished (Done)
	Fetches  int                  // checks that fetched
	Changed  int                  // checks that found the upstream moved
	Failures map[FailureClass]int // failed checks by class
	Urgent   int                  // repositories waiting in the urgent lane
	// Background is the number of repositories waiting in the background
	// lane, due or not.
	Background int
	// Overdue is the part of Background past its due time: due, and
	// waiting for a fetcher, the budget or its host. PastMaxInterval is
	// the part of Overdue whose last successful check is older than
	// MaxInterval (FedMaxInterval on a fed host): the freshness promise is
	// broken for them.
	Overdue, PastMaxInterval int
	Running                  int // checks started and not yet Done
	Gone                     int // repositories parked after repeated NotFound, or a Legal answer
	HostsBackingOff          int // hosts in backoff now
	Healthy                  bool
}

// Scheduler decides which repository a node checks next. It is safe for
// concurrent use.
type Scheduler struct {
	mu       sync.Mutex
	cfg      Config
	clk      clock.Clock
	pol      policy
	rng      *rand.Rand
	repos    map[repokey.Key]*repo // includes removed repos whose check is running
	live     int                   // repositories not removed
	fedLive  int                   // of which on fed hosts
	hosts    map[string]*host
	hostList []*host       // in order of first use, for deterministic ties
	budget   *rate.Limiter // nil when unlimited (bucket.go)
	running  int
	seq      uint64
	adds     uint64  // repositories placed, for spread
	added    []*repo // added, first check not placed yet: see placeAdded
	healthy  bool
	gone     int
	counts   Stats
}

// repo is one repository's schedule state.
type repo struct {
	key     repokey.Key
	host    *host
	hostIdx int // in host.members
	queue   queueKind
	pos     [2]int
	seq     uint64 // tie-break: order of (re)scheduling

	urgentSeq uint64
	notBefore time.Time // background: not started before this
	deadline  time.Time // background: MaxInterval after the last success
	rank      float64   // background: smaller goes first

	lastCheck  time.Time // last successful check
	lastChange time.Time
	lastStart  time.Time
	cloned     bool

	running     bool
	removed     bool  // removed while running: forgotten at Done
	runHost     *host // the host whose running checks count this one's, while it runs
	urgentAgain bool  // asked for while running: urgent again at Done
	told        bool  // a push after the last check was told (ObservePush)

	fails    int // failures in a row
	notFound int // NotFound in a row
	// answered: the coordinator says a forge's feed answered for it
	// lately (SetAnswered); it is fed while its host's feed works too.
	answered bool
	// archived: the forge marks it archived (SetArchived, archived.go).
	archived bool

	interval time.Duration // sourcegraph: the last interval
	est      estimate      // adaptive: change rate
}

// host is one upstream host with its queues, limit and backoff.
type host struct {
	name         string
	fed          bool          // its forge feed works: see SetFed
	members      []*repo       // repositories not removed, in no order
	limit        *rate.Limiter // nil when unlimited (bucket.go)
	backoffUntil time.Time
	throttles    int // throttled answers in a row
	running      int // checks of its repositories running
	urgent       repoHeap
	waiting      repoHeap
	ready        repoHeap
	deadline     repoHeap
}

// New returns a Scheduler for cfg that reads time from clk.
func New(cfg Config, clk clock.Clock) (*Scheduler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if clk == nil {
		return nil, errors.New("schedule: nil clock")
	}
	s := &Scheduler{
		cfg:     cfg,
		clk:     clk,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		repos:   make(map[repokey.Key]*repo),
		hosts:   make(map[string]*host),
		healthy: true,
	}
	if cfg.Budget > 0 {
		s.budget = newBucket(cfg.Budget, cfg.Concurrency)
	}
	switch cfg.Policy {
	case PolicyFixed:
		s.pol = fixed{s}
	case PolicyCompass:
		s.pol = compass{}
	case PolicySourcegraph:
		s.pol = sourcegraph{}
	default:
		s.pol = newAdaptive(s)
	}
	return s, nil
}

func (s *Scheduler) hostFor(name string) *host {
	if h := s.hosts[name]; h != nil {
		return h
	}
	h := &host{
		name:     name,
		urgent:   repoHeap{kind: urgentQueue},
		waiting:  repoHeap{kind: waitingQueue},
		ready:    repoHeap{kind: readyQueue},
		deadline: repoHeap{kind: deadlineQueue},
	}
	if l, ok := s.cfg.HostLimits[name]; ok {
		h.limit = newBucket(l, 1)
	}
	s.hosts[name] = h
	s.hostList = append(s.hostList, h)
	return h
}

// Add starts scheduling a repository, or replaces what is known of one
// already added. A repository that is not cloned goes to the urgent lane;
// the first background check of the others is spread over their interval
// from st.LastCheck (or from now), so that adding many at once does not
// make them due at once.
func (s *Scheduler) Add(key repokey.Key, hostName string, st RepoState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	r := s.repos[key]
	switch {
	case r == nil:
		r = &repo{key: key, pos: [2]int{-1, -1}, hostIdx: -1, est: estimate{bin: -1}}
		s.repos[key] = r
		s.live++
	case r.removed:
		r.removed = false
		s.live++
	default:
		s.unqueue(r)
		s.pol.remove(r)
		s.leave(r)
	}
	s.join(r, s.hostFor(hostName))
	r.lastCheck, r.lastChange, r.cloned = st.LastCheck, st.LastChange, st.Cloned
	for _, t := range st.ChangeTimes {
		if t.After(r.lastChange) {
			r.lastChange = t
		}
	}
	r.fails, r.interval, r.told = 0, 0, false
	s.setNotFound(r, 0)
	s.pol.add(r, st, now)
	switch {
	case r.running: // Done schedules it
	case !r.cloned:
		s.toUrgent(r)
	default:
		r.queue = addedQueue
		s.added = append(s.added, r)
	}
}

// placeAdded schedules the first background check of the repositories
// added since the last call. It waits for the first call that needs the
// queues, so that the policy plans a batch of additions knowing all of
// them (the fixed interval depends on Len, the adaptive one on every
// rate). The first check is spread over the repository's interval from
// its last check (or from now), so that they do not all come due at once.
func (s *Scheduler) placeAdded(now time.Time) {
	for _, r := range s.added {
		if r.queue != addedQueue {
			continue // removed, made urgent or restored since
		}
		base := r.lastCheck
		if base.IsZero() {
			base = now
		}
		r.queue = notQueued
		first := s.pol.first(r, now)
		if r.fed() {
			first = s.cfg.FedMaxInterval
		}
		if r.archived {
			first = s.cfg.ArchivedInterval
		}
		s.toBackground(r, base.Add(time.Duration(s.spread()*float64(first))), now)
	}
	clear(s.added)
	s.added = s.added[:0]
}

// spread returns the next number of a low-discrepancy sequence in [0, 1)
// (multiples of the golden ratio): however many repositories are added,
// their first checks are spread evenly, with no clumps as random draws
// would make.
func (s *Scheduler) spread() float64 {
	s.adds++
	_, frac := math.Modf(float64(s.adds) * 0.6180339887498949)
	return frac
}

// Remove stops scheduling a repository. A check of it that is running
// may still be reported with Done; it is then ignored.
func (s *Scheduler) Remove(key repokey.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[key]
	if r == nil || r.removed {
		return
	}
	s.unqueue(r)
	s.pol.remove(r)
	s.leave(r)
	s.setNotFound(r, 0)
	s.live--
	if r.running {
		r.removed = true
		return
	}
	delete(s.repos, key)
}

// Urgent asks for a check of key as soon as a slot is free, ahead of the
// background lane and outside the budget. It overrides the repository's
// own backoff, not its host's. If the repository is being checked, it is
// checked again once that check is done. Unknown keys are ignored.
func (s *Scheduler) Urgent(key repokey.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[key]
	switch {
	case r == nil || r.removed || r.queue == urgentQueue && r.urgentSeq < firstCloneLane:
	case r.running:
		r.urgentAgain = true
	default:
		s.unqueue(r)
		s.toAsked(r)
	}
}

// ObservePush tells the scheduler that key's upstream was last pushed at
// pushedAt, as a forge's change feed reports it, so that the policy learns
// the repository's change rate from the pushes and not only from its own
// checks. A push is counted once, whether the feed or a check sees it
// first. A push said to be in the future is taken as now, so that a
// forge's clock cannot stop the counting of the pushes to come. It does
// not ask for a check: a push the mirror lacks is asked for with Urgent.
// Unknown keys and zero times are ignored.
func (s *Scheduler) ObservePush(key repokey.Key, pushedAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[key]
	if r == nil || r.removed || pushedAt.IsZero() {
		return
	}
	now := s.clk.Now()
	if pushedAt.After(now) {
		pushedAt = now
	}
	r.lastChange = later(r.lastChange, pushedAt)
	checked := !r.lastCheck.IsZero() && !pushedAt.After(r.lastCheck)
	if !checked {
		r.told = true
	}
	s.pol.push(r, pushedAt, now, checked)
}

// Next returns the repository to check now and marks it running; the
// caller must report the result with Done. When nothing may start now it
// returns ok == false and how long until something may: after wait, or
// earlier if Add, Urgent, Done, Restore or ResetHealth is called. A zero
// wait means nothing will start until one of those is called (nothing is
// scheduled, every slot is busy, or the node is unhealthy with nothing
// urgent). Outside the active hours, the wait is at most until they
// begin.
func (s *Scheduler) Next() (key repokey.Key, ok bool, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	s.placeAdded(now)
	if s.running >= s.cfg.Concurrency {
		return "", false, 0
	}
	var wake time.Time
	note := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}

	resting := !s.cfg.Hours.Active(now)
	if resting {
		note(s.cfg.Hours.Opens(now))
	}

	var pick *repo
	for _, h := range s.hostList {
		if resting && s.cfg.DeclineUrgent {
			break
		}
		if h.urgent.len() == 0 || s.hostFull(h) {
			continue
		}
		if at := h.openAt(now); at.After(now) {
			note(at)
			continue
		}
		if r := h.urgent.top(); pick == nil || r.urgentSeq < pick.urgentSeq {
			pick = r
		}
	}
	if pick != nil {
		s.start(pick, now)
		return pick.key, true, 0
	}
	if !s.healthy || resting {
		return "", false, durationUntil(now, wake)
	}

	budgetAt := now
	if s.budget != nil {
		budgetAt = readyAt(s.budget, now)
	}
	var best *repo
	bestOverdue := false
	for _, h := range s.hostList {
		h.promote(now)
		if s.hostFull(h) {
			continue // a check of it ends first: Done, and the node asks again
		}
		if h.ready.len() == 0 {
			if w := h.waiting.top(); w != nil {
				note(later(w.notBefore, h.openAt(now)))
			}
			continue
		}
		if at := later(h.openAt(now), budgetAt); at.After(now) {
			note(at)
			continue
		}
		r := h.deadline.top()
		overdue := !r.deadline.After(now)
		if !overdue {
			r = h.ready.top()
		}
		if best == nil || rankedBefore(r, overdue, best, bestOverdue) {
			best, bestOverdue = r, overdue
		}
	}
	if best == nil {
		return "", false, durationUntil(now, wake)
	}
	if s.budget != nil {
		s.budget.ReserveN(now, 1)
	}
	s.start(best, now)
	return best.key, true, 0
}

// rankedBefore says whether ready repository a goes before b: those past
// their MaxInterval deadline first (earliest deadline first), then the
// policy's rank.
func rankedBefore(a *repo, aOverdue bool, b *repo, bOverdue bool) bool {
	switch {
	case aOverdue != bOverdue:
		return aOverdue
	case aOverdue && !a.deadline.Equal(b.deadline):
		return a.deadline.Before(b.deadline)
	case !aOverdue && a.rank != b.rank:
		return a.rank < b.rank
	}
	return a.seq < b.seq
}

func durationUntil(now, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	// A wake-up time is in the future; never return 0, which means "wait
	// for an event".
	return max(t.Sub(now), time.Nanosecond)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// hostFull tells whether h has HostConcurrency checks running.
func (s *Scheduler) hostFull(h *host) bool {
	return s.cfg.HostConcurrency > 0 && h.running >= s.cfg.HostConcurrency
}

func (s *Scheduler) start(r *repo, now time.Time) {
	s.unqueue(r)
	r.running = true
	r.lastStart = now
	s.running++
	r.runHost = r.host
	r.host.running++
	if r.host.limit != nil {
		r.host.limit.ReserveN(now, 1)
	}
}

// Done reports the outcome of a check started by Next. Reports for keys
// that are not running are ignored.
func (s *Scheduler) Done(key repokey.Key, o Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[key]
	if r == nil || !r.running {
		return
	}
	r.running = false
	s.running--
	r.runHost.running--
	r.runHost = nil
	s.count(o)
	if r.removed {
		delete(s.repos, key)
		return
	}
	now := s.clk.Now()
	h := r.host
	switch {
	case o.HostThrottled && !h.backoffUntil.After(now):
		// Checks started before the host backed off and answered during
		// the backoff do not lengthen it.
		h.throttles++
		h.backoffUntil = now.Add(jitteredBackoff(h.throttles, hostBase, hostCap, s.rng))
	case !o.HostThrottled && o.Class == None:
		h.throttles = 0
	}
	if o.HostThrottled && o.RetryAfter > 0 {
		// The host's own word, also from a check that started before
		// its backoff: it can lengthen the wait, never shorten it.
		h.backoffUntil = later(h.backoffUntil, now.Add(min(o.RetryAfter, MaxRetryAfter)))
	}

	switch o.Class {
	case None:
		r.fails = 0
		s.setNotFound(r, 0)
		r.cloned = true
		r.lastCheck = now
		s.healthy = true
		if o.Changed {
			lc := now
			if len(o.ChangeTimes) > 0 {
				lc = o.ChangeTimes[0]
				for _, t := range o.ChangeTimes[1:] {
					lc = later(lc, t)
				}
			}
			r.lastChange = later(r.lastChange, lc)
		}
	case Disk:
		s.healthy = false
		r.fails++
		s.setNotFound(r, 0)
	case NotFound:
		r.fails++
		s.setNotFound(r, r.notFound+1)
	case Legal:
		r.fails++
		s.setNotFound(r, max(r.notFound, GoneAfter)) // gone at once
	default:
		r.fails++
		s.setNotFound(r, 0)
	}

	due := s.pol.next(r, now, o)
	if r.fed() && o.Class == None {
		// The feed asks for the checks: this one is the safety net.
		due = now.Add(s.cfg.FedMaxInterval)
	}
	if r.archived && o.Class == None {
		due = now.Add(s.cfg.ArchivedInterval) // read-only upstream: rarely
	}
	if o.Class == None && !r.lastChange.After(r.lastStart) {
		// The check saw every push told; one told while it ran (after
		// it started) waits for the next check.
		r.told = false
	}
	if o.Class != None {
		due = later(due, now.Add(s.retryDelay(o.Class, r.fails, r.notFound)))
	}
	if r.urgentAgain {
		r.urgentAgain = false
		s.toAsked(r)
		return
	}
	s.toBackground(r, due, now)
}

func (s *Scheduler) count(o Outcome) {
	c := &s.counts
	c.Checks++
	if o.Fetched {
		c.Fetches++
	}
	if o.Changed {
		c.Changed++
	}
	if o.Class != None {
		if c.Failures == nil {
			c.Failures = make(map[FailureClass]int)
		}
		c.Failures[o.Class]++
	}
}

// setNotFound sets r's NotFound streak and keeps the count of gone
// repositories.
func (s *Scheduler) setNotFound(r *repo, n int) {
	was, is := r.notFound >= GoneAfter, n >= GoneAfter
	r.notFound = n
	switch {
	case is && !was:
		s.gone++
	case was && !is:
		s.gone--
	}
}

// firstCloneLane orders first clones after every check asked for: their
// places in the urgent lane are numbered from it.
const firstCloneLane = 1 << 62

// toUrgent puts r at the end of the urgent lane: behind every check asked
// for (a webhook, an on-demand check, a check asked for while running),
// and, if it is a first clone, behind the other first clones too. When a
// large catalog arrives, every repository in it is a first clone: a check
// asked for meanwhile must not wait for all of them.
func (s *Scheduler) toUrgent(r *repo) {
	s.seq++
	r.urgentSeq = s.seq
	if !r.cloned {
		r.urgentSeq += firstCloneLane
	}
	r.queue = urgentQueue
	r.host.urgent.push(r)
}

// toAsked puts r at the end of the checks asked for, ahead of the first
// clones in the urgent lane.
func (s *Scheduler) toAsked(r *repo) {
	s.seq++
	r.urgentSeq = s.seq
	r.queue = urgentQueue
	r.host.urgent.push(r)
}

// toBackground schedules r's next background check at due, but no later
// than MaxInterval (FedMaxInterval on a fed host) after its last success
// (unless it is failing: then its retry delay rules) and no earlier than
// MinInterval after its last start.
func (s *Scheduler) toBackground(r *repo, due, now time.Time) {
	s.setDeadline(r, now)
	if r.fails == 0 && due.After(r.deadline) {
		due = r.deadline
	}
	s.toWaiting(r, due)
}

// setDeadline sets r's staleness bound: MaxInterval (FedMaxInterval on a
// fed host) after its last success, or after now if it has none.
func (s *Scheduler) setDeadline(r *repo, now time.Time) {
	base := r.lastCheck
	if base.IsZero() {
		base = now
	}
	limit := s.cfg.MaxInterval
	if r.fed() {
		limit = s.cfg.FedMaxInterval
	}
	if r.archived {
		limit = s.cfg.ArchivedInterval
	}
	r.deadline = base.Add(limit)
}

// toWaiting puts r in its host's background lane, due at due but no
// earlier than MinInterval after its last start.
func (s *Scheduler) toWaiting(r *repo, due time.Time) {
	if !r.lastStart.IsZero() {
		due = later(due, r.lastStart.Add(s.cfg.MinInterval))
	}
	s.seq++
	r.seq = s.seq
	r.notBefore = due
	if !s.pol.ranks() {
		r.rank = float64(due.UnixNano()) / 1e9
	}
	r.queue = waitingQueue
	r.host.waiting.push(r)
}

func (s *Scheduler) unqueue(r *repo) {
	h := r.host
	switch r.queue {
	case urgentQueue:
		h.urgent.remove(r)
	case waitingQueue:
		h.waiting.remove(r)
	case readyQueue:
		h.ready.remove(r)
		h.deadline.remove(r)
	}
	r.queue = notQueued
}

// promote moves the waiting repositories whose time has come to ready.
func (h *host) promote(now time.Time) {
	for {
		r := h.waiting.top()
		if r == nil || r.notBefore.After(now) {
			return
		}
		h.waiting.remove(r)
		r.queue = readyQueue
		h.ready.push(r)
		h.deadline.push(r)
	}
}

// openAt is when the host may be asked again: after its backoff and when
// its rate limit has a token.
func (h *host) openAt(now time.Time) time.Time {
	at := later(now, h.backoffUntil)
	if h.limit != nil {
		at = later(at, readyAt(h.limit, now))
	}
	return at
}

// Len returns the number of repositories scheduled.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// Healthy reports whether background checks run: false after a Disk
// failure, until a check succeeds or ResetHealth is called.
func (s *Scheduler) Healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthy
}

// ResetHealth resumes background checks after a Disk failure, once the
// node has made room.
func (s *Scheduler) ResetHealth() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthy = true
}

// Stats returns the counters and queue lengths.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	s.placeAdded(now)
	st := s.counts
	st.Failures = make(map[FailureClass]int, len(s.counts.Failures))
	for c, n := range s.counts.Failures {
		st.Failures[c] = n
	}
	for _, h := range s.hostList {
		h.promote(now) // as Next would: the due ones are ready
		st.Urgent += h.urgent.len()
		st.Background += h.waiting.len() + h.ready.len()
		st.Overdue += h.ready.len()
		st.PastMaxInterval += h.deadline.countNotAfter(now)
		if h.backoffUntil.After(now) {
			st.HostsBackingOff++
		}
	}
	st.Running = s.running
	st.Gone = s.gone
	st.Healthy = s.healthy
	return st
}
