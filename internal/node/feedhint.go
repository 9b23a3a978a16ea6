package node

import (
	"context"
	"errors"
	"time"
)

// hintFromFeed is where a forge feed's push time, forwarded by the
// coordinator, reaches the full node: on the webhook's path (api's
// FeedPush), a change hint and an urgent check of the owner whose answer is
// weighed against it (ChangeHint). A push before verified_at's second only
// moves verified_at on: nothing changed since.
func (n *Node) hintFromFeed(ctx context.Context, key string, pushedAt time.Time) {
	if n.full == nil || n.full.api == nil {
		return
	}
	if err := n.full.api.FeedPush(ctx, key, pushedAt); err != nil && !errors.Is(err, ErrNotMirrored) {
		n.log.Debug("forge feed: push not taken", "key", key, "pushed_at", pushedAt, "err", err)
	}
}

// setFeeds applies the feeds' status the coordinator sent: the scheduler
// checks the repositories of hosts whose feed works only as a safety net
// (their pushes come as urgent checks) and gives the budget to the others;
// a full node also leaves them out of its spot checks and alerts on a
// failing feed. The coordinator sends the status again in every session,
// so nothing of it is stored.
func (n *Node) setFeeds(working, failing []string) {
	now := make(map[string]bool, len(working))
	for _, h := range working {
		now[h] = true
	}
	n.mu.Lock()
	was := n.fedHosts
	n.fedHosts = now
	n.mu.Unlock()
	for h := range now {
		if !was[h] {
			n.sched.SetFed(h, true)
			n.log.Info("forge feed works: background checks of its host's repositories are rarer", "host", h)
		}
	}
	for h := range was {
		if !now[h] {
			n.sched.SetFed(h, false)
			n.log.Info("forge feed stopped: its host's repositories are polled as before", "host", h)
		}
	}
	if n.full != nil {
		n.full.setFeeds(working, failing)
	}
}
