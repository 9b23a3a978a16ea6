package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Purge protection: the removals that catalog changes make (entries gone
// from the catalog or made unparsable), and the entries a restart's egress
// policy refuses although they were placed, are counted over a sliding
// window (cfg.PurgeWindow); a change whose removals would take
// the window's count over the allowed share of all repositories has its
// removals held (the repositories stay placed and served, under their last
// catalog entry), while its additions and changes are applied. Held
// removals wait for an operator's confirmation; a later catalog commit that
// lists a held repository again simply keeps it.

// removalWindow counts removals over a sliding window (pure: fed the time).
type removalWindow struct {
	Events []removalEvent `json:"events,omitempty"`
}

type removalEvent struct {
	At time.Time `json:"at"`
	N  int       `json:"n"`
}

// count is the number of removals within window before now; older events
// are forgotten.
func (w *removalWindow) count(now time.Time, window time.Duration) int {
	cutoff := now.Add(-window)
	w.Events = slices.DeleteFunc(w.Events, func(e removalEvent) bool { return !e.At.After(cutoff) })
	n := 0
	for _, e := range w.Events {
		n += e.N
	}
	return n
}

func (w *removalWindow) add(now time.Time, n int) {
	if n > 0 {
		w.Events = append(w.Events, removalEvent{At: now, N: n})
	}
}

// heldEntry is the last catalog entry of a repository whose removal is
// held: it keeps being assigned and served under it.
type heldEntry struct {
	URL       string            `json:"url"`
	Fallbacks []string          `json:"fallbacks,omitempty"`
	Attrs     map[string]string `json:"attrs,omitempty"`
	Commit    string            `json:"commit"` // the catalog commit that removed it
}

// Meta keys of the store.
const (
	metaHeld    = "held_removals"
	metaRemoval = "removal_window"
)

// holdOrCount decides what happens to a catalog change's removals: they
// are applied (and counted) when the window allows them, otherwise held.
// It returns the removals to apply now. Caller holds c.mu; c.cat is still
// the previous catalog (the held entries are read from it).
func (c *Coordinator) holdOrCount(commit string, removed []repokey.Key) []repokey.Key {
	removed, inWindow, err := c.checkRemovals(removed, c.engine.Len())
	if err == nil {
		return removed
	}
	c.hold(commit, removed, c.entry)
	c.log.Error("catalog change applied WITHOUT its removals: they would remove too many repositories within the purge window; confirm them to apply",
		"commit", commit, "held", len(removed), "held_total", len(c.held), "removed_in_window", inWindow,
		"window", c.cfg.PurgeWindow, "total", c.engine.Len(), "err", err)
	return nil
}

// checkRemovals is purge protection's rule, whatever makes repositories
// leave what is served (a catalog removal, an entry newly refused by the
// egress policy, an entry newly unparsable): removed, less those held
// already, counted with the window's removals against the allowed share of
// total. Within the share, the removals are counted in the window and
// returned to apply; past it, err wraps catalog.ErrPurge and the caller
// holds them. Caller holds c.mu.
func (c *Coordinator) checkRemovals(removed []repokey.Key, total int) (apply []repokey.Key, inWindow int, err error) {
	removed = slices.DeleteFunc(removed, func(k repokey.Key) bool {
		_, held := c.held[k] // held already (a restart that re-read the catalog)
		return held
	})
	if len(removed) == 0 {
		return removed, 0, nil
	}
	now := c.clk.Now()
	inWindow = c.removals.count(now, c.cfg.PurgeWindow)
	if err := catalog.CheckPurge(total, inWindow+len(removed), c.cfg.MaxPurgeShare); err != nil {
		return removed, inWindow, err
	}
	c.removals.add(now, len(removed))
	c.dirtyPurge()
	return removed, inWindow, nil
}

// hold holds the removal of keys at catalog commit, each under the entry
// entryOf gives (its last one). Caller holds c.mu.
func (c *Coordinator) hold(commit string, keys []repokey.Key, entryOf func(repokey.Key) (catalog.Entry, bool)) {
	for _, k := range keys {
		e, _ := entryOf(k)
		c.held[k] = heldEntry{URL: e.URL, Fallbacks: e.Fallbacks, Attrs: e.Attrs, Commit: commit}
	}
	c.heldCommit = commit
	c.dirtyPurge()
}

// unhold forgets held removals of keys that are listed again (or removed
// or re-added through the API). Caller holds c.mu.
func (c *Coordinator) unhold(keys []repokey.Key) {
	changed := false
	for _, k := range keys {
		if _, ok := c.held[k]; ok {
			delete(c.held, k)
			changed = true
		}
	}
	if changed {
		c.dirtyPurge()
	}
}

// heldEntryOf is the entry (without a Key: see entry) under which a held
// repository is still served.
// heldEntryOf is the entry under which a held repository is still served.
// Caller holds c.mu.
func (c *Coordinator) heldEntryOf(key repokey.Key) (catalog.Entry, bool) {
	h, ok := c.held[key]
	if !ok || h.URL == "" {
		return catalog.Entry{}, false
	}
	return catalog.Entry{URL: h.URL, Fallbacks: h.Fallbacks, Attrs: h.Attrs}, true
}

// pendingPurge describes the held removals (nil: none). Caller holds c.mu.
func (c *Coordinator) pendingPurge() *pendingPurge {
	if len(c.held) == 0 {
		return nil
	}
	keys := make([]string, 0, len(c.held))
	for k := range c.held {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	return &pendingPurge{commit: c.heldCommit, removed: len(keys), total: c.engine.Len(), keys: keys[:min(len(keys), 1000)]}
}

// dirtyPurge queues the held removals and the window for the next persist.
// Caller holds c.mu.
func (c *Coordinator) dirtyPurge() {
	held, _ := json.Marshal(struct {
		Commit string                    `json:"commit"`
		Keys   map[repokey.Key]heldEntry `json:"keys"`
	}{c.heldCommit, c.held})
	window, _ := json.Marshal(c.removals)
	c.dirtyMeta(metaHeld, string(held))
	c.dirtyMeta(metaRemoval, string(window))
}

// restorePurge reads the held removals and the window back.
func (c *Coordinator) restorePurge(held, window []byte) error {
	if len(held) > 0 {
		var h struct {
			Commit string               `json:"commit"`
			Keys   map[string]heldEntry `json:"keys"`
		}
		if err := json.Unmarshal(held, &h); err != nil {
			return fmt.Errorf("held removals: %w", err)
		}
		c.heldCommit = h.Commit
		for k, e := range h.Keys {
			c.held[storedKey(k)] = e
		}
	}
	if len(window) > 0 {
		if err := json.Unmarshal(window, &c.removals); err != nil {
			return fmt.Errorf("removal window: %w", err)
		}
	}
	return nil
}

// confirmHeld applies the held removals of the repositories that are still
// out of the catalog. Caller holds c.mu.
func (c *Coordinator) confirmHeld() (int, string) {
	var keys []repokey.Key
	for k := range c.held {
		if c.cat != nil && c.cat.Has(k.String()) {
			continue
		}
		keys = append(keys, k)
	}
	commit := c.heldCommit
	clear(c.held)
	c.heldCommit = ""
	c.dirtyPurge()
	c.applyChange(nil, keys, nil)
	return len(keys), commit
}

// Purge protection at a restart: the coordinator reads the catalog at the
// commit it last applied again, with the options it starts with now. An
// entry that was placed before and that these options refuse (a stricter
// egress policy, --allow-private-upstreams left out) leaves what is served
// as a catalog removal does, so it is counted and held by the same rule,
// under its entry as that commit lists it; the refusal itself is one of
// the catalog's problems.

// refusedEntries returns the entries of c.cat's commit that the current
// options refuse and a policy that allows every address accepts, by key,
// less those the API's overlay decides and those held already. A catalog
// whose problems include no refusal by the egress policy is not read again
// (a restart of a large catalog with a few bad lines costs nothing more).
// Caller holds c.mu (or is restoring).
func (c *Coordinator) refusedEntries(ctx context.Context) (map[repokey.Key]catalog.Entry, error) {
	if c.cat == nil || c.problems == 0 || !slices.ContainsFunc(c.cat.Problems(), refusedByPolicy) {
		return nil, nil
	}
	anyUpstream, err := egress.New(egress.Config{Allow: []string{"0.0.0.0/0", "::/0"}, AllowPrivate: true})
	if err != nil {
		return nil, err
	}
	opt := catalog.Options{Egress: anyUpstream, Fold: c.cfg.Fold}
	all, err := catalog.Load(ctx, c.git, c.src.Dir(), c.cat.Commit(), opt)
	if err != nil {
		return nil, fmt.Errorf("read catalog commit %s again for the entries it refuses: %w", c.cat.Commit(), err)
	}
	out := make(map[repokey.Key]catalog.Entry)
	all.Keys(func(k repokey.Key) bool {
		_, api := c.overlay[k]
		_, held := c.held[k]
		if !api && !held && !c.cat.Has(k.String()) {
			out[k], _ = all.Get(k.String())
		}
		return true
	})
	return out, nil
}

// refusedByPolicy tells a catalog problem that is the egress policy's
// refusal of an entry's host.
func refusedByPolicy(p catalog.Problem) bool { return p.Refused }

// holdRefused applies purge protection's rule to the entries the current
// options refuse, at a restart: those that were placed before (wasPlaced)
// are removals, applied within the share and held past it. It returns the
// removals applied. Caller is restoring: keys is the key set of the
// catalog and the overlay, without the refused entries.
func (c *Coordinator) holdRefused(refused map[repokey.Key]catalog.Entry, keys []repokey.Key, wasPlaced func(cands []repokey.Key) []repokey.Key) []repokey.Key {
	if len(refused) == 0 {
		return nil
	}
	cands := slices.Sorted(maps.Keys(refused))
	placed := wasPlaced(cands)
	if len(placed) == 0 {
		return nil
	}
	commit := c.cat.Commit()
	total := len(keys) + len(placed)
	apply, inWindow, err := c.checkRemovals(placed, total)
	if err == nil {
		c.log.Warn("restart: repositories the current egress policy refuses are removed (within the purge share)",
			"commit", commit, "removed", len(apply), "removed_in_window", inWindow, "total", total)
		return apply
	}
	c.hold(commit, apply, func(k repokey.Key) (catalog.Entry, bool) { e, ok := refused[k]; return e, ok })
	c.log.Error("restart: repositories the current egress policy refuses are held, still served: they would remove too many repositories within the purge window; "+
		"restore the policy they were placed under (--allow-private-upstreams, --egress-allow, --egress-ports), or confirm their removal",
		"commit", commit, "held", len(apply), "held_total", len(c.held), "removed_in_window", inWindow,
		"window", c.cfg.PurgeWindow, "total", total, "first", apply[:min(len(apply), catalog.HeldShown)], "err", err)
	return nil
}
