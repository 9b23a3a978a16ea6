package coordinator

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/schedule/feedplan"

	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// The forges' change feeds run here, on the coordinator that leads (Run
// runs on the leader only): one per fleet, on an operator's machine, where
// the operator's tokens are, where every key and its owner are known, and
// where an urgent check is routed to its owner anyway. A full node could
// not: there may be several, and each would spend the same tokens.
//
// For each forge host with a client, a feed planner (feedplan) picks the
// repositories to ask about within the host's request budget, most often
// those that push most and each at least every MaxInterval. A push newer
// than the owner's last check becomes an urgent check on its owner, with
// the push time for its scheduler; a push the feed had not seen goes to
// every full node, which takes it on the webhook's path and holds the owner
// to it (see feedPush): the full node's check of the push rides on the
// owner's (rideFeedCheck), so that a push is one check of the owner. Both
// are paced per repository. Every node is told
// which feeds work (FeedStatus), and an owner which of its repositories a
// feed covers (Repo.fed): the feed answered for it within --fed-max-age.
// Only those repositories' background checks become a safety net; one the
// forge cannot name (unaskable) or did not answer for lately is checked as
// a repository no feed watches. A full node leaves the working feeds'
// hosts out of its spot checks.
//
// The request budget is a ceiling: a feed asks only about repositories
// due, none twice within --forge-min-ask-interval (or the forge's longer
// X-Poll-Interval), and leaves the rest of its tokens' budget unspent. A
// feed that a rate limit holds back past --fed-max-age is feed-limited.

// FeedConfig configures the forges' change feeds.
type FeedConfig struct {
	Forges forge.Config
	// RequestsPerHour is each host's request budget an hour, per token
	// (0: DefaultFeedRequestsPerHour).
	RequestsPerHour float64
	// MaxInterval: every repository is asked about at least this often
	// (0: a day); MinInterval: none more often (0: a minute).
	MaxInterval, MinInterval time.Duration
	// FedMaxAge is how long an answer for a repository keeps it fed (0:
	// twice its planned interval).
	FedMaxAge time.Duration
	// Spacing paces the urgent checks of one repository (0: a minute).
	Spacing time.Duration
	// Options of the forge clients (clock, HTTP client, logger).
	Client forge.Options
}

// DefaultFeedRequestsPerHour leaves a fifth of GitHub's 5,000 points an
// hour to the token's other uses.
const DefaultFeedRequestsPerHour = 4000

// feedHost is the feed of one forge host.
type feedHost struct {
	host    string
	client  forge.Lookup
	perHour float64 // requests
	batch   int     // repositories one PushedAt takes
	// perRequest is how many repositories one HTTP request answers for:
	// a batch on GitHub's GraphQL, one on the REST forges.
	perRequest int

	// wake ends the wait of a feed that had no repository, when some come.
	wake chan struct{}

	mu   sync.Mutex
	plan *feedplan.Planner
	sent map[string]time.Time // urgent checks asked, for pacing; bounded
	// deferred are new pushes that pacing held back, for when their
	// spacing ends.
	deferred map[string]time.Time
	// refused counts the names the forge answered that were not
	// repository names, since refusedLogged, when that was last logged
	// (at most once every refusedLogEvery).
	refused       int
	refusedLogged time.Time
	// failures in a row, for the log and the health metric
	failures int
	// unaskable counts the host's keys the forge cannot name, which the
	// plan leaves out.
	unaskable int
	// heldSince is when a spent rate limit began to hold the feed back
	// (zero: it is not held), and lostHeld says a repository lost its
	// answer since; answeredAt is the last answer.
	heldSince, answeredAt time.Time
	lostHeld              bool
	requests              hourCount
	// nextSlot is the earliest time of the host's next request within
	// its budget: the feed's asks and the listers' pages (waitSlot) take
	// their slots from it.
	nextSlot time.Time
	// statusAt is when the full nodes were last sent the feed's figures.
	statusAt time.Time
	state    feedState // under the coordinator's mu
	// checks are the urgent checks the feed asked of owners, by key, for
	// the full nodes' checks of the same push to ride on (rideFeedCheck);
	// under the coordinator's mu, at most one a key.
	checks map[repokey.Key]*feedCheck
}

// feedCheck is the urgent check that a feed's push asked of a key's owner.
// The full nodes told of the push ask for a check of their own, on the
// webhook's path (FetchNow): theirs is this one, not a second, and its
// result answers their tasks.
type feedCheck struct {
	task   string    // the check's own task: its result carries it
	node   uint32    // the node asked
	at     time.Time // when
	hinted map[uint32]bool
	// riders are the tasks of the full nodes that asked, waiting for the
	// result; result is the result once in.
	riders []string
	result *fleetv1.CheckResult
}

// maxFeedChecks is how many feed checks a host keeps before those older
// than an hour are let go (their riders' routes are gone by then too:
// gcTasks).
const maxFeedChecks = 1024

// feedState is what the nodes are told of a feed.
type feedState uint8

const (
	feedUnknown feedState = iota // not answered yet
	feedWorking
	feedFailing
	// feedLimited: a spent rate limit has held the feed back past
	// --fed-max-age; its repositories are no longer fed.
	feedLimited
)

func (st feedState) String() string {
	switch st {
	case feedWorking:
		return "working"
	case feedFailing:
		return "failing"
	case feedLimited:
		return "feed-limited"
	}
	return "starting"
}

// hourCount counts events in the last hour, a bucket a minute.
type hourCount struct {
	minute [60]int64 // the minute (Unix) each bucket counts
	n      [60]uint32
}

func (h *hourCount) add(now time.Time, n int) {
	m := now.Unix() / 60
	b := m % 60
	if h.minute[b] != m {
		h.minute[b], h.n[b] = m, 0
	}
	h.n[b] += uint32(n)
}

func (h *hourCount) last(now time.Time) uint32 {
	m := now.Unix() / 60
	var sum uint32
	for b := range h.n {
		if m-h.minute[b] < 60 {
			sum += h.n[b]
		}
	}
	return sum
}

// coverageEvery is the longest a feed goes without looking at which
// repositories it still covers, even while a rate limit holds it back.
const coverageEvery = time.Minute

// refusedLogEvery is the least time between two log lines about a forge's
// names that were refused.
const refusedLogEvery = time.Hour

// failingAfter is how many failed requests in a row make a feed failing
// (a spent rate limit waited out is not a failure).
const failingAfter = 3

// setFeedState records f's state and tells every node when it changed.
func (c *Coordinator) setFeedState(f *feedHost, st feedState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.state == st {
		return
	}
	f.state = st
	switch st {
	case feedFailing:
		c.log.Error("forge feed failing: its repositories are polled only until it answers again", "host", f.host)
	case feedLimited:
		c.log.Error("forge feed limited: a rate limit has held it back past the fed max age; its repositories are polled only until it answers again", "host", f.host)
	}
	for _, s := range c.sessions {
		s.queueFeedStatus()
	}
}

// feedStatus is what nodes are told of the feeds; a full node is also
// told each feed's figures (detail). Caller holds c.mu.
func (c *Coordinator) feedStatus(detail bool) *fleetv1.FeedStatus {
	st := &fleetv1.FeedStatus{}
	now := c.clk.Now()
	for host, f := range c.feeds {
		switch f.state {
		case feedWorking:
			st.Working = append(st.Working, host)
		case feedFailing:
			st.Failing = append(st.Failing, host)
		case feedLimited:
			st.Limited = append(st.Limited, host)
		}
		if detail {
			st.Hosts = append(st.Hosts, f.figures(now))
		}
	}
	slices.Sort(st.Working)
	slices.Sort(st.Failing)
	slices.Sort(st.Limited)
	slices.SortFunc(st.Hosts, func(a, b *fleetv1.FeedHost) int { return strings.Compare(a.GetHost(), b.GetHost()) })
	return st
}

// figures are f's coverage, requests and budgets. Caller holds c.mu
// (f.state).
func (f *feedHost) figures(now time.Time) *fleetv1.FeedHost {
	f.mu.Lock()
	h := &fleetv1.FeedHost{Host: f.host, State: f.state.String(), Repos: uint32(f.plan.Len()), Fed: uint32(f.plan.FedCount()),
		Unaskable: uint32(f.unaskable), RequestsLastHour: f.requests.last(now), RequestsPerHourMax: f.perHour,
		MinAskIntervalMs: f.plan.MinInterval().Milliseconds()}
	if !f.answeredAt.IsZero() {
		h.AnsweredAtUnix = f.answeredAt.Unix()
	}
	f.mu.Unlock()
	for _, b := range f.client.Budgets() {
		t := &fleetv1.TokenBudget{Name: b.Name, Remaining: int32(b.Remaining), Limit: int32(b.Limit)}
		if !b.Reset.IsZero() {
			t.ResetUnix = b.Reset.Unix()
		}
		if b.RestsUntil.After(now) {
			t.RestsUntilUnix = b.RestsUntil.Unix()
		}
		h.Tokens = append(h.Tokens, t)
	}
	return h
}

// feedFed says whether a feed answered for key within its fed max age.
// Caller holds c.mu.
func (c *Coordinator) feedFed(key repokey.Key, now time.Time) bool {
	f := c.feeds[key.Host()]
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.plan.Fed(key.String(), now)
}

// startFeeds makes the feeds of the configured hosts that have a client.
// Caller holds no lock.
func (c *Coordinator) startFeeds() []*feedHost {
	cfg := c.cfg.Feeds
	if len(cfg.Forges.Forges) == 0 {
		return nil
	}
	opt := cfg.Client
	if opt.Clock == nil {
		opt.Clock = c.clk
	}
	if opt.Logger == nil {
		opt.Logger = c.log
	}
	maxInterval := cfg.MaxInterval
	if maxInterval <= 0 {
		maxInterval = 24 * time.Hour
	}
	var feeds []*feedHost
	for _, host := range cfg.Forges.Hosts() {
		f := cfg.Forges.Forges[host]
		tokens := cfg.Forges.Tokens[host]
		cl, err := forge.New(f, tokens, opt)
		if err != nil {
			c.log.Info("forge feed off; its repositories are polled", "host", host, "why", err)
			continue
		}
		lk, ok := cl.(forge.Lookup)
		if !ok {
			continue
		}
		perHour := cfg.RequestsPerHour
		if perHour <= 0 {
			perHour = DefaultFeedRequestsPerHour
		}
		perHour *= float64(max(len(tokens), 1))
		perRequest := forge.PathsPerRequest(f.Kind, lk.BatchSize())
		plan, err := feedplan.New(feedplan.Options{PerHour: perHour * float64(perRequest),
			MaxInterval: maxInterval, MinInterval: cfg.MinInterval, FedMaxAge: cfg.FedMaxAge})
		if err != nil {
			c.log.Error("forge feed off", "host", host, "err", err)
			continue
		}
		feeds = append(feeds, &feedHost{host: host, client: lk, perHour: perHour, batch: lk.BatchSize(), perRequest: perRequest,
			plan: plan, sent: make(map[string]time.Time), deferred: make(map[string]time.Time),
			wake: make(chan struct{}, 1), checks: make(map[repokey.Key]*feedCheck)})
	}
	if len(feeds) == 0 {
		return nil
	}
	byHost := make(map[string]*feedHost, len(feeds))
	for _, f := range feeds {
		byHost[f.host] = f
	}
	c.mu.Lock()
	c.feeds = byHost
	c.feedAddAll()
	c.mu.Unlock()
	for _, f := range feeds {
		c.log.Info("forge feed on", "host", f.host, "repositories", f.plan.Len(), "requests_per_hour", f.perHour, "batch", f.batch)
	}
	return feeds
}

// feedAddAll adds every key to its host's feed (a key added twice changes
// nothing): at the feeds' start and after a first catalog's bulk load.
// Caller holds c.mu.
func (c *Coordinator) feedAddAll() {
	if len(c.feeds) == 0 {
		return
	}
	now := c.clk.Now()
	for _, f := range c.feeds {
		f.mu.Lock()
		f.unaskable = 0 // counted again: every key comes
	}
	c.engine.Each(func(key repokey.Key, _, _ uint32, _ bool) {
		if f := c.feeds[key.Host()]; f != nil {
			f.add(key, now)
		}
	})
	for _, f := range c.feeds {
		f.mu.Unlock()
		f.wakeUp()
	}
}

// add plans key, or counts it when the forge cannot name it. Caller holds
// f.mu.
func (f *feedHost) add(key repokey.Key, now time.Time) {
	if !f.client.Askable(strings.TrimPrefix(key.String(), f.host+"/")) {
		f.unaskable++
		return
	}
	f.plan.Add(key.String(), now, nil)
}

// remove stops planning or counting key. Caller holds f.mu.
func (f *feedHost) remove(key repokey.Key) {
	if !f.client.Askable(strings.TrimPrefix(key.String(), f.host+"/")) {
		f.unaskable = max(f.unaskable-1, 0)
		return
	}
	f.plan.Remove(key.String())
}

// wakeUp ends f's wait, if it waits for repositories to come.
func (f *feedHost) wakeUp() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// feedKeysChanged tells the feeds of keys added and removed. Caller holds
// c.mu.
func (c *Coordinator) feedKeysChanged(added, removed []repokey.Key) {
	if len(c.feeds) == 0 {
		return
	}
	now := c.clk.Now()
	for _, k := range added {
		if f := c.feeds[k.Host()]; f != nil {
			f.mu.Lock()
			empty := f.plan.Len() == 0
			f.add(k, now)
			f.mu.Unlock()
			if empty {
				f.wakeUp()
			}
		}
	}
	for _, k := range removed {
		if f := c.feeds[k.Host()]; f != nil {
			f.mu.Lock()
			f.remove(k)
			f.mu.Unlock()
		}
	}
}

// runFeed asks f's forge until ctx ends: a batch of the repositories due,
// at most perHour requests an hour, waiting out spent limits and backoffs,
// and looking at least every coverageEvery at which repositories it still
// covers.
func (c *Coordinator) runFeed(ctx context.Context, f *feedHost) {
	every := time.Duration(float64(time.Hour) / f.perHour)
	for {
		wait := every
		now := c.clk.Now()
		c.feedDeferred(f, now)
		f.mu.Lock()
		slot := f.nextSlot
		f.mu.Unlock()
		if slot.After(now) {
			wait = slot.Sub(now) // a lister took the budget's slots
		} else if ready := f.client.Ready(now); ready.After(now) {
			wait = ready.Sub(now)
		} else if n, err := c.askFeed(ctx, f, now); err != nil {
			var we *forge.WaitError
			if errors.As(err, &we) && we.Until.After(now) {
				wait = max(wait, we.Until.Sub(now))
			}
		} else if n == 0 {
			// Nothing due (or no repository on this host yet): wait for
			// the first to fall due, not the budget's pace.
			f.mu.Lock()
			due := f.plan.NextDue()
			f.mu.Unlock()
			wait = max(every, due.Sub(now))
			if due.IsZero() {
				wait = coverageEvery // none yet: f.wake ends the wait when some come
			}
		} else if requests := (n + f.perRequest - 1) / f.perRequest; requests > 1 {
			wait = time.Duration(requests) * every // the REST forges: a request a repository
		}
		c.feedCoverage(f, c.clk.Now())
		wait = min(wait, coverageEvery)
		select {
		case <-ctx.Done():
			return
		case <-c.clk.After(wait):
		case <-f.wake:
		}
	}
}

// askFeed asks about one batch and acts on the answer; it returns how
// many repositories it asked about.
func (c *Coordinator) askFeed(ctx context.Context, f *feedHost, now time.Time) (int, error) {
	f.mu.Lock()
	keys := f.plan.Next(now, f.batch)
	f.mu.Unlock()
	if len(keys) == 0 {
		return 0, nil
	}
	paths := make([]string, len(keys))
	for i, k := range keys {
		paths[i] = strings.TrimPrefix(k, f.host+"/")
	}
	ans, err := f.client.PushedAt(ctx, paths)
	c.cfg.met.feedAsked(f.host, len(keys), err)
	f.mu.Lock()
	requests := (len(keys) + f.perRequest - 1) / f.perRequest
	f.requests.add(now, requests)
	if next := now.Add(time.Duration(requests) * time.Duration(float64(time.Hour)/f.perHour)); next.After(f.nextSlot) {
		f.nextSlot = next
	}
	if pi := f.client.PollInterval(); pi > 0 {
		f.plan.SetMinInterval(pi) // the forge's X-Poll-Interval, when longer
	}
	if err != nil {
		f.plan.Failed(keys, now) // asked again once the client is ready
	}
	f.mu.Unlock()
	if err != nil {
		var we *forge.WaitError
		if errors.As(err, &we) && we.Limited {
			f.mu.Lock()
			if f.heldSince.IsZero() {
				f.heldSince = now
			}
			f.mu.Unlock()
			c.log.Info("forge feed: rate limit spent; waiting for its reset", "host", f.host, "until", we.Until)
			return len(keys), err
		}
		f.mu.Lock()
		f.failures++
		n := f.failures
		f.mu.Unlock()
		if n == 1 || n%100 == 0 {
			c.log.Warn("forge feed: request failed; its repositories are polled meanwhile", "host", f.host, "failures_in_a_row", n, "err", err)
		}
		if n >= failingAfter {
			c.setFeedState(f, feedFailing)
		}
		return len(keys), err
	}
	c.setFeedState(f, feedWorking)
	times, refused := forge.PushTimes(c.cfg.Fold, f.host, ans)
	f.mu.Lock()
	if f.failures > 0 {
		c.log.Info("forge feed: answering again", "host", f.host, "after_failures", f.failures)
	}
	f.failures = 0
	f.heldSince, f.lostHeld, f.answeredAt = time.Time{}, false, now
	newPush := make(map[string]bool)
	for _, k := range keys {
		if f.plan.Observe(k, now, times[k]) { // zero: no answer, not a change
			newPush[k] = true
		}
	}
	f.mu.Unlock()
	for _, m := range ans.Missing {
		// Its git answers decide: the owner checks it now (paced), and
		// a 404 from there counts toward deleted as any other.
		if k, err := c.cfg.Fold.Canonical(f.host + "/" + m); err == nil && c.feedMissing(f, k) {
			c.log.Debug("forge feed: a repository the forge does not know (deleted, or private); the owner checks it", "host", f.host, "path", m)
		}
	}
	ans.Renamed = append(ans.Renamed, c.feedAskByID(ctx, f, ans.Missing)...) // renames.go
	renamed := make(map[string]string, len(ans.Renamed))
	for _, r := range ans.Renamed {
		// To is the forge's word, a repository name (forge.ValidName)
		// on its own host: a key of the same host, or nothing.
		from, err := c.cfg.Fold.Canonical(f.host + "/" + r.From)
		to, err2 := c.cfg.Fold.Canonical(f.host + "/" + r.To)
		if err != nil || err2 != nil || from == to {
			continue
		}
		renamed[from.String()] = to.String()
	}
	same := make([]string, 0, len(times))
	for k := range times {
		same = append(same, k) // answered under its own name (a push time)
	}
	c.feedRenames(renamed, forge.IDs(c.cfg.Fold, f.host, ans), same, now) // renames.go
	if ans.Refused > 0 {
		f.mu.Lock()
		f.refused += ans.Refused
		n, log := f.refused, f.refusedLogged.IsZero() || now.Sub(f.refusedLogged) >= refusedLogEvery
		if log {
			f.refused, f.refusedLogged = 0, now
		}
		f.mu.Unlock()
		if log { // never the names: they are what the forge made up
			c.log.Warn("forge feed: the forge answered names that are not repository names, or that carry a credential; those repositories are left as they are",
				"host", f.host, "refused", n)
		}
	}
	if refused > 0 {
		c.log.Debug("forge feed: paths that are not keys", "host", f.host, "refused", refused)
	}
	parents, refusedParents := forge.Parents(c.cfg.Fold, f.host, ans)
	if refusedParents > 0 {
		c.log.Debug("forge feed: forks' parents that are not keys of the host", "host", f.host, "refused", refusedParents)
	}
	if len(parents) > 0 {
		c.mu.Lock()
		c.feedParents(parents)
		c.mu.Unlock()
	}
	changed := 0
	for k, t := range times {
		if c.feedPush(f, k, t, now, newPush[k]) {
			changed++
		}
	}
	c.feedFlags(keys, forge.Flags(c.cfg.Fold, f.host, ans), now)
	heads, _ := forge.Heads(c.cfg.Fold, f.host, ans)
	for k, h := range heads {
		if c.feedHead(f, k, h) {
			changed++
		}
	}
	c.cfg.met.feedChanged(f.host, changed)
	return len(keys), nil
}

// feedPush acts on one push time. One the owner has not checked since is an
// urgent check on the owner, with the push time for its scheduler. One the
// feed had not seen before (newPush), or that the owner has not checked
// since, goes to every full node, which takes it on the webhook's path: a
// change hint, and an urgent check of the owner whose answer is held against
// the push; when the coordinator asked the owner already, the full nodes'
// checks ride on that one (rideFeedCheck). Not the owner's last check alone
// decides: that is the owner's own claim, and a frozen owner claims fresh
// checks. Paced per repository.
func (c *Coordinator) feedPush(f *feedHost, ks string, pushed, now time.Time, newPush bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.engine.Key(ks) // the forge's key of the host, if the engine places it
	if !ok {
		return false
	}
	st := c.status[key]
	// Forges give push times in whole seconds: a push in the second of
	// the last check may be after it.
	// A repository not checked yet has its first clone coming: no more.
	ownerBehind := st != nil && st.lastCheck > 0 && !pushed.Add(time.Second).Before(time.UnixMilli(st.lastCheck))
	if !ownerBehind && !newPush {
		return false // the owner has checked since, and the full nodes were told
	}
	spacing := c.feedSpacing()
	f.mu.Lock()
	last, asked := f.sent[ks]
	if asked && now.Sub(last) < spacing {
		// Paced: acted on when the spacing ends (the feed will not
		// report this push as new again).
		if t, ok := f.deferred[ks]; !ok || pushed.After(t) {
			f.deferred[ks] = pushed
		}
		f.mu.Unlock()
		return false
	}
	delete(f.deferred, ks)
	if len(f.sent) > 100_000 {
		for k, t := range f.sent {
			if now.Sub(t) >= spacing {
				delete(f.sent, k)
			}
		}
	}
	f.sent[ks] = now
	f.mu.Unlock()
	owner, target := c.owner(key)
	var fc *feedCheck
	for _, id := range []uint32{owner, target} {
		if s := c.sessions[id]; id != 0 && s != nil && ownerBehind {
			fc = &feedCheck{task: rand.Text(), node: id, at: now, hinted: make(map[uint32]bool)}
			s.queueCheckPushed(key, fc.task, pushed)
			break
		}
	}
	for _, s := range c.fullSessions() {
		s.queueHint(&fleetv1.ChangeHint{Key: ks, PushedAtUnix: pushed.Unix()})
		if fc != nil {
			fc.hinted[s.id] = true
		}
	}
	if fc != nil {
		f.keepCheck(key, fc)
	}
	c.log.Debug("forge feed: a push newer than the last check", "host", f.host, "key", key, "pushed_at", pushed, "owner", owner,
		"owner_behind", ownerBehind, "new_push", newPush)
	return true
}

// keepCheck records fc, the feed's check of key. The riders of an earlier
// check of key not answered yet ride on fc. Caller holds c.mu.
func (f *feedHost) keepCheck(key repokey.Key, fc *feedCheck) {
	if old := f.checks[key]; old != nil && old.result == nil {
		fc.riders = old.riders
	}
	if len(f.checks) >= maxFeedChecks {
		for k, o := range f.checks {
			if fc.at.Sub(o.at) >= time.Hour {
				delete(f.checks, k)
			}
		}
	}
	f.checks[key] = fc
}

// rideFeedCheck takes a full node's on-demand check of a key (FetchNow)
// onto the check a feed's push asked of its owner, when the full node was
// told of that push (it asks on the webhook's path) and asks within the
// feeds' spacing, which paces the urgent checks of a repository anyway:
// its task is answered by that check's result, at once if it is in. It
// returns the node asked. Caller holds c.mu.
func (c *Coordinator) rideFeedCheck(from uint32, key repokey.Key, task string) (uint32, bool) {
	f := c.feeds[key.Host()]
	if f == nil || task == "" {
		return 0, false
	}
	fc := f.checks[key]
	now := c.clk.Now()
	if fc == nil || !fc.hinted[from] || now.Sub(fc.at) >= c.feedSpacing() {
		return 0, false
	}
	delete(fc.hinted, from) // once: the full node's next ask is a check of its own
	c.gcTasks()
	c.tasks[task] = pendingTask{node: from, at: now}
	if fc.result != nil {
		c.answerTasks(fc.result, []string{task})
	} else {
		fc.riders = append(fc.riders, task)
	}
	c.log.Debug("forge feed: a full node's check of a push rides on the owner's", "key", key, "task", task, "node", fc.node)
	return fc.node, true
}

// unrideFeedCheck takes task off the feed's check of key it rides on, when
// it does: the check goes on for the feed. It returns the node asked.
// Caller holds c.mu.
func (c *Coordinator) unrideFeedCheck(key repokey.Key, task string) (uint32, bool) {
	f := c.feeds[key.Host()]
	if f == nil || f.checks[key] == nil {
		return 0, false
	}
	fc := f.checks[key]
	i := slices.Index(fc.riders, task)
	if i < 0 {
		return 0, false
	}
	fc.riders = slices.Delete(fc.riders, i, i+1)
	return fc.node, true
}

// feedCheckDone records res when it answers a feed's check, and returns
// the tasks that rode on it. Caller holds c.mu.
func (c *Coordinator) feedCheckDone(key repokey.Key, res *fleetv1.CheckResult) []string {
	f := c.feeds[key.Host()]
	if f == nil {
		return nil
	}
	fc := f.checks[key]
	if fc == nil || fc.result != nil || !slices.Contains(res.GetTaskIds(), fc.task) {
		return nil
	}
	fc.result = proto.CloneOf(res) // answers the riders that come later, as it answers those here
	fc.result.TaskIds = nil
	riders := fc.riders
	fc.riders = nil
	return riders
}

// feedSpacing is the least time between two urgent checks of one
// repository that the feeds ask for.
func (c *Coordinator) feedSpacing() time.Duration {
	if c.cfg.Feeds.Spacing > 0 {
		return c.cfg.Feeds.Spacing
	}
	return time.Minute
}

// feedDeferred acts on the new pushes that pacing held back, once their
// spacing has ended.
func (c *Coordinator) feedDeferred(f *feedHost, now time.Time) {
	spacing := c.feedSpacing()
	f.mu.Lock()
	var due map[string]time.Time
	for k, t := range f.deferred {
		if now.Sub(f.sent[k]) >= spacing {
			if due == nil {
				due = make(map[string]time.Time)
			}
			due[k] = t
		}
	}
	f.mu.Unlock()
	for k, t := range due {
		c.feedPush(f, k, t, now, true)
	}
}

// feedCoverage tells the owners of the repositories whose fed state
// changed (an Assign again carries it), makes the feed limited when a rate
// limit held it back past the fed max age (--fed-max-age; by default, once
// a repository lost its answer meanwhile, or when none had one), and, at
// most once a coverageEvery, sends the full nodes the feed's figures.
func (c *Coordinator) feedCoverage(f *feedHost, now time.Time) {
	f.mu.Lock()
	gained, lost := f.plan.Coverage(now)
	held := !f.heldSince.IsZero()
	if held && len(lost) > 0 {
		f.lostHeld = true
	}
	limited := held && now.Sub(f.heldSince) >= c.feedHostMaxAge() &&
		(f.lostHeld || c.cfg.Feeds.FedMaxAge > 0 || f.plan.FedCount() == 0)
	figures := now.Sub(f.statusAt) >= coverageEvery
	if figures {
		f.statusAt = now
	}
	f.mu.Unlock()
	if limited {
		c.setFeedState(f, feedLimited)
	}
	if len(gained)+len(lost) > 0 {
		c.log.Debug("forge feed: coverage changed", "host", f.host, "fed", len(gained), "unfed", len(lost))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, keys := range [][]string{gained, lost} {
		for _, ks := range keys {
			k, ok := c.engine.Key(ks) // the feed plans the engine's keys
			if !ok {
				continue
			}
			// The owner, and a target cloning it (as a session's start
			// sends them): an Assign again carries Repo.fed.
			owner, target := c.owner(k)
			if s := c.sessions[owner]; owner != 0 && s != nil {
				s.queueAssign(k, false)
			}
			if s := c.sessions[target]; target != 0 && s != nil && c.engine.Sent(k) {
				s.queueAssign(k, false)
			}
		}
	}
	if figures {
		c.cfg.met.feedCovered(f.figures(now))
		for _, s := range c.fullSessions() {
			s.queueFeedStatus()
		}
	}
}

// feedHostMaxAge is how long a rate limit may hold a feed back that never
// answered for a repository before it is limited: --fed-max-age, or twice
// the least ask interval.
func (c *Coordinator) feedHostMaxAge() time.Duration {
	if c.cfg.Feeds.FedMaxAge > 0 {
		return c.cfg.Feeds.FedMaxAge
	}
	return 2 * max(c.cfg.Feeds.MinInterval, time.Minute)
}

// runFeeds runs every configured feed until ctx ends.
func (c *Coordinator) runFeeds(ctx context.Context, feeds []*feedHost) {
	var wg sync.WaitGroup
	for _, f := range feeds {
		wg.Add(1)
		go func() { defer wg.Done(); c.runFeed(ctx, f) }()
	}
	wg.Wait()
	c.mu.Lock()
	c.feeds = nil
	c.mu.Unlock()
}

// feedHead acts on the default branch a feed names for key (head, as
// refs/heads/...): when the owner's last check saw HEAD name another, the
// default branch switched, which moves no ref, so no push time shows it:
// an urgent check of the owner follows it (an urgent check asks HEAD), and
// its result reaches the full nodes as the state's head. Nothing while the
// owner has said nothing of HEAD (a first clone to come, a previous
// version). Paced as the feed's pushes are.
func (c *Coordinator) feedHead(f *feedHost, ks, head string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.engine.Key(ks) // the forge's key of the host, if the engine places it
	if !ok {
		return false
	}
	st := c.status[key]
	if st == nil || st.head == "" || st.head == head {
		return false
	}
	if !c.feedAskOwner(f, key) {
		return false
	}
	c.log.Info("forge feed: the default branch switched; the owner checks it now", "host", f.host, "key", key,
		"head", st.head, "forge_head", head)
	return true
}

// feedMissing acts on a repository the forge says it does not know: an
// urgent check of the owner, paced as pushes are, unless its state says
// it is gone already (its daily recheck stands). The check's answer
// decides: a 404 counts toward deleted, a good answer (a private
// repository the token cannot see) changes nothing.
func (c *Coordinator) feedMissing(f *feedHost, key repokey.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status[key]
	if !c.engine.Has(key) || st == nil || st.state.Departed() {
		return false
	}
	return c.feedAskOwner(f, key)
}

// feedAskOwner asks key's owner for an urgent check, paced per repository
// as the feed's pushes are (f.sent). Caller holds c.mu.
func (c *Coordinator) feedAskOwner(f *feedHost, key repokey.Key) bool {
	now := c.clk.Now()
	f.mu.Lock()
	last, asked := f.sent[key.String()]
	paced := asked && now.Sub(last) < c.feedSpacing()
	if !paced {
		f.sent[key.String()] = now
	}
	f.mu.Unlock()
	if paced {
		return false // the feed asks again: acted on then
	}
	owner, _ := c.owner(key)
	s := c.sessions[owner]
	if owner == 0 || s == nil {
		return false
	}
	s.queueCheck(key, "")
	return true
}
