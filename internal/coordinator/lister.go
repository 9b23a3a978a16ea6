package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/store"
)

// Listers: a catalog line such as https://github.com/org/* names an
// owner's repositories (package catalog). The coordinator that leads
// lists each owner through its forge's API, with the client of the
// host's feed (the operator's tokens, their limits and backoff), taking
// its requests from the feed's budget, at its start and every
// ListerInterval. The last good listing of each lister is kept in the
// store (bucketListings), with its time: a restart neither drops its
// repositories nor lists them again before the interval. The catalog the
// coordinator applies is the catalog read from git with every lister's
// last good listing (catalog.WithListings): a listing that drops
// repositories removes them as a catalog commit would, through purge
// protection, and a listing that fails (a spent limit, an error, a bad
// answer) changes nothing.

// bucketListings holds each lister's last good listing, by pattern.
const bucketListings = "listings"

// listerRetry is the least time before a failed listing is tried again
// (longer when the client backs off).
const listerRetry = time.Minute

// listing is a lister's last good listing, as stored.
type listing struct {
	Repos    []catalog.Listed `json:"repos"`
	ListedAt time.Time        `json:"listed_at"`
	// Requests is how many requests it took; Refused, how many names
	// the forge gave that were left out.
	Requests int `json:"requests,omitempty"`
	Refused  int `json:"refused,omitempty"`
}

// listerRun is what the coordinator knows of a lister between listings
// (not stored): when it failed and why, and when to try again.
type listerRun struct {
	err     string
	failAt  time.Time
	retryAt time.Time
}

// restoreListings reads the stored listings. Caller is restoring.
func (c *Coordinator) restoreListings(ctx context.Context) error {
	return c.db.Scan(ctx, bucketListings, "", func(k string, v []byte) error {
		var l listing
		if err := json.Unmarshal(v, &l); err != nil {
			c.log.Warn("restore: skip an unreadable listing; it is listed again", "lister", k, "err", err)
			return nil
		}
		c.listings[k] = &l
		return nil
	})
}

// listedRepos is the repositories of every listing, by pattern, for
// catalog.WithListings. Caller holds c.mu (or is restoring).
func (c *Coordinator) listedRepos() map[string][]catalog.Listed {
	out := make(map[string][]catalog.Listed, len(c.listings))
	for p, l := range c.listings {
		out[p] = l.Repos
	}
	return out
}

// withListings is cat with the listings, and what they change; the
// listings of listers no longer in cat are forgotten. Caller holds c.mu
// (or is restoring).
func (c *Coordinator) withListings(cat *catalog.Catalog) (*catalog.Catalog, catalog.Delta) {
	c.forgetListings(cat)
	return cat.WithListings(c.listedRepos())
}

// forgetListings forgets the listings of listers no longer in cat.
// Caller holds c.mu (or is restoring).
func (c *Coordinator) forgetListings(cat *catalog.Catalog) {
	live := make(map[string]bool)
	for _, l := range cat.Listers() {
		live[l.Pattern] = true
	}
	for p := range c.listings {
		if !live[p] {
			delete(c.listings, p)
			delete(c.listerRuns, p)
			c.listingDirty[p] = true
		}
	}
}

// wakeListers asks the lister loop to look at the listers now (a catalog
// change added some).
func (c *Coordinator) wakeListers() {
	select {
	case c.listerWake <- struct{}{}:
	default:
	}
}

// listerLoop lists the listers that are due until ctx ends.
func (c *Coordinator) listerLoop(ctx context.Context) {
	for {
		next := c.listDue(ctx)
		wait := c.cfg.ListerInterval
		if !next.IsZero() {
			wait = max(next.Sub(c.clk.Now()), time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.clk.After(wait):
		case <-c.listerWake:
		}
	}
}

// listDue lists every lister that is due, one after the other, and
// returns when the next one is (zero: none).
func (c *Coordinator) listDue(ctx context.Context) time.Time {
	c.mu.Lock()
	var listers []catalog.Lister
	if c.cat != nil {
		listers = c.cat.Listers()
	}
	c.mu.Unlock()
	var next time.Time
	for _, l := range listers {
		if ctx.Err() != nil {
			return time.Time{}
		}
		now := c.clk.Now()
		due := c.listerDue(l.Pattern)
		if due.After(now) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		c.list(ctx, l)
		if due := c.listerDue(l.Pattern); next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

// listerDue is when pattern's owner is to be listed.
func (c *Coordinator) listerDue(pattern string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var due time.Time
	if l := c.listings[pattern]; l != nil {
		due = l.ListedAt.Add(c.cfg.ListerInterval)
	}
	if r := c.listerRuns[pattern]; r != nil && r.retryAt.After(due) {
		due = r.retryAt
	}
	return due
}

// list lists l's owner and applies the listing; a failure keeps the last
// good one.
func (c *Coordinator) list(ctx context.Context, l catalog.Lister) {
	began := c.clk.Now()
	c.mu.Lock()
	f := c.feeds[l.Host]
	c.mu.Unlock()
	var ol forge.OwnerLister
	if f != nil {
		ol, _ = f.client.(forge.OwnerLister)
	}
	if ol == nil {
		c.listerFailed(l, began, began.Add(c.cfg.ListerInterval), fmt.Errorf(
			"no forge client for %s: configure it (--forge %s=KIND, and --forge-token where the forge needs one)", l.Host, l.Host))
		return
	}
	if ready := ol.Ready(began); ready.After(began) {
		c.listerFailed(l, began, ready, fmt.Errorf("the forge's tokens rest or back off until %s", ready.UTC().Format(time.RFC3339)))
		return
	}
	ans, err := ol.ListOwner(ctx, forge.OwnerQuery{Owner: l.Owner, Subgroups: l.Subgroups,
		BeforePage: func(ctx context.Context) error { return f.waitSlot(ctx, c.clk) }})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		retry := began.Add(listerRetry)
		var we *forge.WaitError
		if errors.As(err, &we) && we.Until.After(retry) {
			retry = we.Until
		}
		if latest := began.Add(c.cfg.ListerInterval); retry.After(latest) {
			retry = latest
		}
		c.listerFailed(l, c.clk.Now(), retry, err)
		return
	}
	repos := make([]catalog.Listed, len(ans.Repos))
	for i, r := range ans.Repos {
		repos[i] = catalog.Listed{Name: r.Path, ID: r.ID, Fork: r.Fork, Archived: r.Archived, Size: r.Size, Topics: r.Topics}
	}
	c.applyListing(l, &listing{Repos: repos, ListedAt: c.clk.Now(), Requests: ans.Requests, Refused: ans.Refused})
}

// listerFailed records a failed listing and logs it (once until it
// changes or the lister answers again).
func (c *Coordinator) listerFailed(l catalog.Lister, now, retry time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.listerRuns[l.Pattern]
	if r == nil {
		r = &listerRun{}
		c.listerRuns[l.Pattern] = r
	}
	if r.err != err.Error() {
		kept := 0
		if last := c.listings[l.Pattern]; last != nil {
			kept = len(last.Repos)
		}
		c.log.Error("lister: the listing failed; its last good listing is kept", "lister", l.Pattern,
			"file", l.File, "line", l.Line, "kept", kept, "retry_at", retry.UTC(), "err", err)
	}
	if r.failAt.IsZero() {
		r.failAt = now
	}
	r.err, r.retryAt = err.Error(), retry
}

// applyListing makes ls l's listing and applies what it changes, as a
// catalog commit's change is applied: its removals through purge
// protection.
func (c *Coordinator) applyListing(l catalog.Lister, ls *listing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cat == nil || !slices.ContainsFunc(c.cat.Listers(), func(x catalog.Lister) bool { return x.Pattern == l.Pattern }) {
		return // the line left the catalog while it was listed
	}
	if r := c.listerRuns[l.Pattern]; r != nil && r.err != "" {
		c.log.Info("lister: listing again", "lister", l.Pattern, "after", ls.ListedAt.Sub(r.failAt).Round(time.Second))
	}
	delete(c.listerRuns, l.Pattern)
	c.listings[l.Pattern] = ls
	c.listingDirty[l.Pattern] = true
	next, d := c.withListings(c.cat)
	added, removed, changed := deltaKeys(d)
	commit := c.cat.Commit()
	applied := c.holdOrCount(commit, c.effectiveRemovals(removed))
	c.unhold(added)
	c.cat = next
	c.setProblems(next.Problems())
	c.applyChange(added, applied, changed)
	c.applyHeld()
	log := c.log.Info
	if len(added)+len(removed)+len(changed) == 0 {
		log = c.log.Debug // the same listing again
	}
	log("lister: listed", "lister", l.Pattern, "repos", len(ls.Repos), "requests", ls.Requests, "refused", ls.Refused,
		"added", len(added), "removed", len(applied), "held", len(removed)-len(applied), "changed", len(changed), "entries", next.Len())
	c.signalPersist()
}

// listingOps are the store's writes of the listings changed since the
// last persist. Caller holds c.mu.
func (c *Coordinator) listingOps() []store.Op {
	var ops []store.Op
	for _, p := range slices.Sorted(maps.Keys(c.listingDirty)) {
		l := c.listings[p]
		if l == nil {
			ops = append(ops, store.Op{Bucket: bucketListings, Key: p, Delete: true})
			continue
		}
		b, _ := json.Marshal(l)
		ops = append(ops, store.Op{Bucket: bucketListings, Key: p, Value: b})
	}
	return ops
}

// waitSlot waits for the next of the feed's request slots and takes it:
// a listing's pages share the host's budget with the feed's asks.
func (f *feedHost) waitSlot(ctx context.Context, clk clock.Clock) error {
	every := time.Duration(float64(time.Hour) / f.perHour)
	f.mu.Lock()
	now := clk.Now()
	at := f.nextSlot
	if at.Before(now) {
		at = now
	}
	f.nextSlot = at.Add(every)
	f.requests.add(at, 1)
	f.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(d):
		}
	}
	return nil
}
