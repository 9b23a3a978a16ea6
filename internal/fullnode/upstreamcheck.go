package fullnode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/pullplan"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repoview"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// The full node's own checks of upstreams (package pullplan holds the
// decisions): verified_at kept and persisted, change hints heard, and the
// upstream asked directly when a hint is due or a spot check picks a
// repository. A direct check lists the upstream's refs (through the
// egress-checked git runner, as every upstream connection), and when they
// differ from what the full node serves, fetches from the upstream itself.

// bucketUpstreamVerified keeps each repository's verified_at (unix seconds,
// decimal) across restarts.
const bucketUpstreamVerified = "upstream-verified"

// errNotMirrored is a change hint's answer for a key the mirror does not
// hold.
var errNotMirrored = errors.New("repository not mirrored")

// hintFromFeed is where a forge feed's push time, forwarded by the
// coordinator, reaches the full node: on the webhook's path (api's
// FeedPush), a change hint and an urgent check of the owner whose answer is
// weighed against it (changeHint). A push before verified_at's second only
// moves verified_at on: nothing changed since.
func (f *Node) hintFromFeed(ctx context.Context, h *fleetv1.ChangeHint) {
	if h.GetPushedAtUnix() <= 0 {
		return
	}
	key, pushedAt := h.GetKey(), time.Unix(h.GetPushedAtUnix(), 0)
	k, err := repokey.Parse(key) // where the coordinator's feed push arrives
	if err != nil {
		f.log.Debug("forge feed: push of an invalid key ignored", "key", key, "err", err)
		return
	}
	if err := f.api.FeedPush(ctx, k, pushedAt); err != nil && !errors.Is(err, errNotMirrored) {
		f.log.Debug("forge feed: push not taken", "key", key, "pushed_at", pushedAt, "err", err)
	}
}

// setFeeds records the feeds' status the coordinator sent: the hosts whose
// feed works are left out of the spot checks, a failing or limited feed is
// an alert (alerts.go), and each feed's figures are the API's (Feeds).
func (f *Node) setFeeds(st *fleetv1.FeedStatus) {
	covered := make(map[string]bool, len(st.GetWorking()))
	for _, h := range st.GetWorking() {
		covered[h] = true
	}
	f.mu.Lock()
	f.feedCovers = covered
	f.feedsFailing = slices.Clone(st.GetFailing())
	f.feedsLimited = slices.Clone(st.GetLimited())
	f.feedHosts = st.GetHosts()
	f.mu.Unlock()
}

// Feeds returns each forge feed as the coordinator last said (the API's
// GET /api/v1/feeds).
func (f *Node) Feeds() []api.FeedStatus {
	f.mu.Lock()
	hosts := f.feedHosts
	f.mu.Unlock()
	out := make([]api.FeedStatus, 0, len(hosts))
	for _, h := range hosts {
		st := api.FeedStatus{Host: h.GetHost(), State: h.GetState(), Repos: int(h.GetRepos()), Fed: int(h.GetFed()),
			Unaskable: int(h.GetUnaskable()), RequestsLastHour: int(h.GetRequestsLastHour()), RequestsPerHourMax: h.GetRequestsPerHourMax(),
			MinAskIntervalSeconds: float64(h.GetMinAskIntervalMs()) / 1000, Tokens: []api.TokenBudget{}}
		if at := h.GetAnsweredAtUnix(); at > 0 {
			t := time.Unix(at, 0).UTC()
			st.AnsweredAt = &t
		}
		for _, tb := range h.GetTokens() {
			b := api.TokenBudget{Name: tb.GetName(), Remaining: int(tb.GetRemaining()), Limit: int(tb.GetLimit())}
			if r := tb.GetResetUnix(); r > 0 {
				t := time.Unix(r, 0).UTC()
				b.Reset = &t
			}
			if r := tb.GetRestsUntilUnix(); r > 0 {
				t := time.Unix(r, 0).UTC()
				b.RestsUntil = &t
			}
			st.Tokens = append(st.Tokens, b)
		}
		out = append(out, st)
	}
	return out
}

// changeHint tells the full node that key's upstream changed no later than
// pushedAt: a webhook's receipt time, or the push time a forge feed reports.
// A push no later than the repository's verified_at is the feed saying
// nothing changed since: verified_at advances to now. A later one opens a
// hint: unless the owner's pull shows the change in time (--hint-wait),
// or when the owner reports it unchanged after the push, the full node asks
// the upstream itself, fetches what the owner did not, and counts a stale
// report against the owner. It returns at once; the work is done by the
// full node's own loop.
func (f *Node) changeHint(key repokey.Key, pushedAt time.Time) error {
	return f.hint(key, func(p *pullplan.Plan, now time.Time, v repoview.Entry, served string) pullplan.Action {
		return p.Hear(key, pushedAt, now, fromUnixSeconds(v.VerifiedAt()), served, v.Owner())
	})
}

// verifyOnDemand makes an on-demand check of key vouch for its answer: an
// owner that reports it unchanged is checked against the upstream.
func (f *Node) verifyOnDemand(key repokey.Key) error {
	return f.hint(key, func(p *pullplan.Plan, now time.Time, v repoview.Entry, served string) pullplan.Action {
		return p.VerifyOnDemand(key, now, served, v.Owner())
	})
}

// hint records a hint of key with open, given the time, key's view and
// the digest served, and acts on the answer.
func (f *Node) hint(key repokey.Key, open func(p *pullplan.Plan, now time.Time, v repoview.Entry, served string) pullplan.Action) error {
	now := f.clk.Now()
	d, _ := f.n.Digest(key)
	f.mu.Lock()
	v, ok := f.view.Entry(key)
	if !ok {
		f.mu.Unlock()
		return fmt.Errorf("change hint for %s: %w", key, errNotMirrored)
	}
	act := open(f.plan, now, v, d)
	f.plan.OwnerHad(key, v.Digest())
	f.mu.Unlock()
	switch act {
	case pullplan.Verified:
		f.setVerified(key, now)
	case pullplan.RefusedFull:
		f.log.Warn("too many change hints open: this one is dropped (the spot checks remain)", "key", key, "max", pullplan.DefaultMaxHints)
	default:
		f.reclass(key) // a pending change: not current
		f.wakeFresh()
	}
	return nil
}

// ChangeHint is the webhook's path into the full node (api.ChangeHinter),
// with the key the API parsed from the payload or hintFromFeed from the
// coordinator's message.
func (b *backend) ChangeHint(_ context.Context, k repokey.Key, pushedAt time.Time) error {
	return b.f.changeHint(k, pushedAt)
}

func (f *Node) wakeFresh() {
	select {
	case f.freshWake <- struct{}{}:
	default:
	}
}

// setVerified advances key's verified_at to at (never back), for the
// counters and the stale alert, and marks it for the store (persistVerified).
func (f *Node) setVerified(key repokey.Key, at time.Time) {
	s := unixSeconds(at)
	f.mu.Lock()
	v, ok := f.view.Entry(key)
	if !ok || s <= v.VerifiedAt() {
		f.mu.Unlock()
		return
	}
	f.view.SetVerified(key, s)
	f.stale.Move(int64(v.VerifiedAt())*1000, int64(s)*1000)
	f.markVerified(key, s)
	f.mu.Unlock()
	f.reclass(key)
}

// markVerified notes key's verified_at s (0: the key left) for the next
// persistVerified. Caller holds f.mu.
func (f *Node) markVerified(key repokey.Key, s uint32) {
	if f.verifiedDirty == nil {
		f.verifiedDirty = map[repokey.Key]uint32{}
	}
	f.verifiedDirty[key] = s
}

// persistInterval is how often the changed verified_at are written: a
// crash loses at most that much of them (a verified_at older than it
// could be, never newer).
const persistInterval = 30 * time.Second

// persistVerified writes the verified_at changed since the last time, in
// one transaction (one a verification would be one disk sync each).
func (f *Node) persistVerified(ctx context.Context) {
	f.mu.Lock()
	dirty := f.verifiedDirty
	f.verifiedDirty = nil
	f.mu.Unlock()
	if len(dirty) == 0 {
		return
	}
	ops := make([]store.Op, 0, len(dirty))
	for k, s := range dirty {
		if s == 0 {
			ops = append(ops, store.Op{Bucket: bucketUpstreamVerified, Key: k.String(), Delete: true})
		} else {
			ops = append(ops, store.Op{Bucket: bucketUpstreamVerified, Key: k.String(), Value: []byte(strconv.FormatUint(uint64(s), 10))})
		}
	}
	if err := f.db.Batch(ctx, ops); err != nil {
		f.log.Warn("store verified_at; will retry", "repos", len(ops), "err", err)
		f.mu.Lock()
		for k, s := range dirty {
			if _, newer := f.verifiedDirty[k]; !newer {
				f.markVerified(k, s)
			}
		}
		f.mu.Unlock()
	}
}

// persistLoop writes verified_at every persistInterval, and once more at
// the end.
func (f *Node) persistLoop(ctx context.Context) {
	tick := f.clk.NewTicker(persistInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			f.persistVerified(context.Background())
			return
		case <-tick.C():
			f.persistVerified(ctx)
		}
	}
}

// loadVerified reads the stored verified_at of every repository; each is
// given to its repository when the coordinator first sends it (states).
func (f *Node) loadVerified(ctx context.Context) error {
	restored := map[string]uint32{}
	err := f.db.Scan(ctx, bucketUpstreamVerified, "", func(k string, v []byte) error {
		if s, err := strconv.ParseUint(string(v), 10, 32); err == nil {
			restored[k] = uint32(s)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("full node: read verified_at: %w", err)
	}
	f.mu.Lock()
	f.restored = restored
	f.mu.Unlock()
	return nil
}

// afterPull follows a pull of key from owner whose answer the upstream's
// listing seen (if asked) checked: equal, verified_at is the time of the
// listing; different, the upstream has moved past what the owner served,
// which is a hint of a change like a webhook's.
func (f *Node) afterPull(key repokey.Key, owner uint32, res mirror.Result, seen upstreamSeen) {
	if !seen.ok {
		return
	}
	if maps.Equal(seen.refs.Refs, res.After.Refs) {
		f.setVerified(key, seen.at)
		f.mu.Lock()
		f.plan.Verified(key, seen.at)
		f.mu.Unlock()
		f.reclass(key)
		return
	}
	f.log.Info("the upstream is ahead of what the owner served: checking it again", "key", key, "node", owner)
	f.mu.Lock()
	act := f.plan.Hear(key, seen.at, f.clk.Now(), time.Time{}, res.After.Digest(), owner)
	f.mu.Unlock()
	if act != pullplan.RefusedFull {
		f.reclass(key)
		f.wakeFresh()
	}
}

// upstreamSeen is the upstream's listing a pull was checked against.
type upstreamSeen struct {
	refs gitcmd.Refs
	at   time.Time // when it was asked for
	ok   bool
}

// checkUpstream asks key's upstream for its refs (why: "hint" or "spot")
// and, when they are not what the full node serves, fetches from the
// upstream itself. Then verified_at is the time of the question, and the
// hint book decides whether the owner reported stale refs.
// One check of a key runs at a time; a caller that finds one running waits
// for it (an on-demand task's answer then includes it).
func (f *Node) checkUpstream(ctx context.Context, key repokey.Key, why string) error {
	f.mu.Lock()
	st := f.view.Get(key)
	running := f.checking[key]
	if st != nil && running == nil {
		f.checking[key] = make(chan struct{})
	}
	f.mu.Unlock()
	if running != nil {
		select {
		case <-running:
		case <-ctx.Done():
		}
		return nil
	}
	if st == nil {
		return nil
	}
	defer func() {
		f.mu.Lock()
		close(f.checking[key])
		delete(f.checking, key)
		f.mu.Unlock()
	}()
	k := key
	if _, broken := f.n.BrokenState(key); broken || st.GetOwner() == f.n.ID() || !f.mirror.Has(k) {
		// Its own checks verify what it owns; a repository not held (or
		// broken) is served by nothing the upstream could contradict.
		f.mu.Lock()
		f.plan.ForgetHint(key)
		f.mu.Unlock()
		f.reclass(key)
		return nil
	}
	asked := f.clk.Now()
	up, err := f.upstreamRefs(k, st)(ctx, nil)
	if err != nil {
		f.retryHint(key, asked)
		return fmt.Errorf("full node: ask the upstream of %s: %w", key, err)
	}
	local, err := f.mirror.Refs(ctx, k)
	if err != nil {
		f.retryHint(key, asked)
		return fmt.Errorf("full node: read the refs of %s: %w", key, err)
	}
	differed := !maps.Equal(up.Refs, local.Refs)
	if differed {
		start := f.clk.Now()
		res, err := f.syncUpstream(ctx, k, st)
		f.flog.Append(f.n.WorkEntry(key.String(), "upstream-"+why, start, res, err))
		if err != nil {
			f.retryHint(key, asked)
			return fmt.Errorf("full node: fetch %s from its upstream: %w", key, err)
		}
		// Only a fetch that changed what is served shows the owner
		// behind: the upstream may have moved back in between.
		differed = res.Changed
		if differed {
			f.n.SetDigest(key, res.After.Digest())
			f.served(key, res)
			f.log.Warn("the upstream has refs its owner did not bring: fetched from the upstream", "key", key, "node", st.GetOwner(),
				"check", why, "digest", res.After.Digest())
			f.mu.Lock()
			f.plan.Ensure(key, asked, local.Digest(), st.GetOwner())
			f.mu.Unlock()
		}
	}
	if !differed && up.Head != "" && up.Head != local.Head {
		// The refs are the upstream's, HEAD is not: the default branch
		// switched with no ref moving, which no pull brings.
		f.followHead(ctx, k, up.Head, "upstream-"+why)
	}
	f.setVerified(key, asked)
	f.mu.Lock()
	act, owner := f.plan.Checked(key, asked, differed, up.Digest())
	f.mu.Unlock()
	f.reclass(key)
	if act == pullplan.CountStale {
		f.countStale(ctx, key, owner)
	}
	return nil
}

// taskAnswer weighs an on-demand check's answer digest for key, asked for
// at asked, against the hints (pullplan.Plan.TaskClaim): a claim of
// "unchanged" to check now, or a stale report (queued for freshLoop to
// count).
func (f *Node) taskAnswer(key repokey.Key, asked time.Time, digest string) pullplan.Action {
	f.mu.Lock()
	act := f.plan.TaskClaim(key, asked, digest, f.clk.Now())
	f.mu.Unlock()
	if act == pullplan.CountStale {
		f.wakeFresh()
	}
	return act
}

// knownStale tells whether digest is a copy of key's owner that the full
// node found behind the upstream.
func (f *Node) knownStale(key repokey.Key, digest string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.plan.Stale(key)
	return s != "" && s == digest
}

// retryHint makes key's hint due again after a failed check.
func (f *Node) retryHint(key repokey.Key, at time.Time) {
	f.mu.Lock()
	f.plan.RetryCheck(key, at.Add(f.plan.HintWait()))
	f.mu.Unlock()
}

// countStale counts one stale report against owner (its refs of key were
// behind the upstream after a change it should have seen), and revokes it
// at --stale-revoke.
func (f *Node) countStale(ctx context.Context, key repokey.Key, owner uint32) {
	n := f.charge(ctx, &f.staleReports, owner, f.cfg.StaleRevoke, func(n uint64, limit int) string {
		return fmt.Sprintf("reported stale refs after %d upstream changes (--stale-revoke %d)", n, limit)
	})
	f.log.Warn("stale report: the owner reported a repository unchanged after its upstream changed", "key", key, "node", owner,
		"stale_reports", n)
}

// staleReportCount is how many stale reports were counted against node.
func (f *Node) staleReportCount(node uint32) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.staleReports.counts[node]
}

// freshChecks bounds the full node's own checks of upstreams at once: an
// upstream that answers slowly (up to --git-timeout) holds one, not all.
const freshChecks = 4

// freshLoop asks upstreams for the hints that are due and, at
// --spot-check-per-hour, for a sample of the repositories whose verified_at
// is oldest, at most freshChecks at a time; it counts the stale reports
// that others found. It returns once its checks have ended.
func (f *Node) freshLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, freshChecks)
	start := func(key repokey.Key, why string) bool {
		select {
		case slots <- struct{}{}:
		default:
			return false
		}
		wg.Go(func() {
			defer func() { <-slots; f.wakeFresh() }()
			if err := f.checkUpstream(ctx, key, why); err != nil && ctx.Err() == nil {
				f.log.Warn("could not check a repository against its upstream; will retry", "key", key, "check", why, "err", err)
			}
		})
		return true
	}
	gap := pullplan.SpotGap(f.cfg.SpotCheckPerHour)
	var nextSpot time.Time
	if gap > 0 {
		nextSpot = f.clk.Now().Add(gap)
	}
	var batch []repokey.Key
	var picked uint32 // when batch was chosen (unix seconds)
	for ctx.Err() == nil {
		now := f.clk.Now()
		f.mu.Lock()
		due := f.plan.Tick(now)
		f.mu.Unlock()
		for _, c := range due.Stale {
			f.countStale(ctx, c.Key, c.Node)
		}
		for _, k := range due.Check {
			if !start(k, "hint") { // every slot taken: due again in a second
				f.mu.Lock()
				f.plan.RetryCheck(k, now.Add(time.Second))
				f.mu.Unlock()
			}
		}
		f.mu.Lock()
		next := f.plan.NextWake(now).Check
		f.mu.Unlock()
		if gap > 0 && !now.Before(nextSpot) {
			if len(batch) == 0 {
				batch, picked = f.spotBatch(f.cfg.SpotCheckPerHour), unixSeconds(now)
			}
			for len(batch) > 0 && f.verifiedSince(batch[0], picked) {
				batch = batch[1:] // verified since it was picked
			}
			if len(batch) > 0 && start(batch[0], "spot") {
				batch = batch[1:]
			}
			nextSpot = now.Add(gap)
		}
		wait := time.Minute
		if !next.IsZero() {
			wait = min(wait, next.Sub(now))
		}
		if gap > 0 {
			wait = min(wait, nextSpot.Sub(now))
		}
		select {
		case <-ctx.Done():
			return
		case <-f.freshWake:
		case <-f.clk.After(max(wait, 0)):
		}
	}
}

// spotBatch picks the next n repositories to spot-check: owned by another
// node, on a host no forge feed covers, the oldest verified_at first.
func (f *Node) spotBatch(n int) []repokey.Key {
	self := f.n.ID()
	f.mu.Lock()
	defer f.mu.Unlock()
	return pullplan.OldestVerified(f.view.VerifiedTimes(), n, func(key repokey.Key) bool {
		v, _ := f.view.Entry(key)
		if v.Owner() == 0 || v.Owner() == self {
			return false
		}
		return !f.feedCovers[key.Host()]
	})
}

// verifiedSince tells whether key's verified_at is after s (unix seconds),
// or key left the view.
func (f *Node) verifiedSince(key repokey.Key, s uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.view.Entry(key)
	return !ok || v.VerifiedAt() > s
}

// followHead points the HEAD of key's mirror at head, the upstream's, as
// the full node's own listing of the upstream showed it, and announces
// the switch (served): an event, and an entry of kind in the fetch log.
func (f *Node) followHead(ctx context.Context, key repokey.Key, head, kind string) {
	start := f.clk.Now()
	res, err := f.mirror.FollowHead(ctx, key, head)
	if err != nil {
		f.log.Warn("could not follow the upstream's HEAD", "key", key, "head", head, "err", err)
		return
	}
	if res.After.Head == res.Before.Head {
		return
	}
	f.flog.Append(f.n.WorkEntry(key.String(), kind, start, res, nil))
	f.served(key, res)
	f.log.Info("HEAD follows the upstream's default branch", "key", key, "old", res.Before.Head, "new", res.After.Head)
}

// headQueue bounds the repositories waiting for headLoop: past it, a
// switch the owner reported is followed at the next check of the
// upstream that finds it (a spot check, a hint, a pull of a ref change).
const headQueue = 1024

// headChanged queues key, whose owner reports that HEAD switched with no
// ref moving, for headLoop to check against the upstream.
func (f *Node) headChanged(key repokey.Key) {
	select {
	case f.heads <- key:
	default:
		f.log.Debug("HEAD switch queue full; followed at the next check of the upstream", "key", key)
	}
}

// headLoop checks against the upstream each repository whose owner
// reported a HEAD switch (headChanged): what the full node serves follows
// the upstream, never the owner's word alone.
func (f *Node) headLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case key := <-f.heads:
			if err := f.checkUpstream(ctx, key, "head"); err != nil && ctx.Err() == nil {
				f.log.Warn("could not check a HEAD switch against the upstream", "key", key, "err", err)
			}
		}
	}
}
