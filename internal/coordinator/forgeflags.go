package coordinator

import (
	"time"

	"github.com/gitfleet/gitfleet/internal/forge"
)

// forgeFlag is what a forge's API says of a repository beyond its pushes:
// archived (read-only, kept) or disabled (refused to everyone), since
// when the feed first saw it (unix ms). It is the feed's word alone: the
// repository's git answers decide nothing here, and this decides nothing
// of what is served. An archived repository shows the state archived
// while its checks succeed and is checked once per --archived-interval
// (Repo.archived); a disabled one shows disabled. Kept in memory: after a
// restart the feed's next answer brings it back.
type forgeFlag struct {
	archived, disabled bool
	since              int64
}

// feedFlags records what the forge said of keys, the repositories a feed
// asked about (flags: those it marks, by key; a key asked and not in
// flags is marked nothing). A change reaches the owner (an Assign again
// carries Repo.archived) and the full nodes (the state).
func (c *Coordinator) feedFlags(keys []string, flags map[string]forge.Flag, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ks := range keys {
		k, ok := c.engine.Key(ks) // the feed plans the engine's keys
		if !ok {
			continue
		}
		fl := flags[ks]
		old, had := c.forgeFlags[k]
		if old.archived == fl.Archived && old.disabled == fl.Disabled {
			continue
		}
		if fl.Archived || fl.Disabled {
			c.forgeFlags[k] = forgeFlag{archived: fl.Archived, disabled: fl.Disabled, since: now.UnixMilli()}
		} else {
			delete(c.forgeFlags, k)
		}
		c.log.Info("forge feed: the forge marks the repository", "key", k, "archived", fl.Archived, "disabled", fl.Disabled, "before_marked", had)
		if old.archived != fl.Archived {
			owner, target := c.owner(k)
			if s := c.sessions[owner]; owner != 0 && s != nil {
				s.queueAssign(k, false)
			}
			if s := c.sessions[target]; target != 0 && s != nil && c.engine.Sent(k) {
				s.queueAssign(k, false)
			}
		}
		c.broadcastState(k)
	}
}
