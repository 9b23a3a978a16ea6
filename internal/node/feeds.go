package node

// setFeeds applies the feeds' status the coordinator sent: the scheduler
// checks the repositories of hosts whose feed works, and that the feed
// answered for lately (Repo.fed, in each Assign), only as a safety net
// (their pushes come as urgent checks) and gives the budget to the others.
// (A full node also leaves them out of its spot checks and alerts on a
// failing feed: its role hears of the status too.) The coordinator sends
// the status again in every session, so nothing of it is stored.
func (n *Node) setFeeds(working []string) {
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
}
