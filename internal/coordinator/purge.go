package coordinator

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gitfleet/gitfleet/internal/catalog"
)

// Purge protection: the removals that catalog changes make are counted over
// a sliding window (cfg.PurgeWindow); a change whose removals would take
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
func (c *Coordinator) holdOrCount(commit string, removed []string) []string {
	removed = slices.DeleteFunc(removed, func(k string) bool {
		_, held := c.held[k] // held already (a restart that re-read the catalog)
		return held
	})
	if len(removed) == 0 {
		return removed
	}
	now := c.clk.Now()
	total := c.engine.Len()
	inWindow := c.removals.count(now, c.cfg.PurgeWindow)
	err := catalog.CheckPurge(total, inWindow+len(removed), c.cfg.MaxPurgeShare)
	if err == nil {
		c.removals.add(now, len(removed))
		c.dirtyPurge()
		return removed
	}
	for _, k := range removed {
		e, _ := c.entry(k)
		c.held[k] = heldEntry{URL: e.URL, Fallbacks: e.Fallbacks, Attrs: e.Attrs, Commit: commit}
	}
	c.heldCommit = commit
	c.dirtyPurge()
	c.log.Error("catalog change applied WITHOUT its removals: they would remove too many repositories within the purge window; confirm them to apply",
		"commit", commit, "held", len(removed), "held_total", len(c.held), "removed_in_window", inWindow,
		"window", c.cfg.PurgeWindow, "total", total, "err", err)
	return nil
}

// unhold forgets held removals of keys that are listed again (or removed
// or re-added through the API). Caller holds c.mu.
func (c *Coordinator) unhold(keys []string) {
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

// heldEntryOf is the entry under which a held repository is still served.
// Caller holds c.mu.
func (c *Coordinator) heldEntryOf(key string) (catalog.Entry, bool) {
	h, ok := c.held[key]
	if !ok || h.URL == "" {
		return catalog.Entry{}, false
	}
	return catalog.Entry{Key: key, URL: h.URL, Fallbacks: h.Fallbacks, Attrs: h.Attrs}, true
}

// pendingPurge describes the held removals (nil: none). Caller holds c.mu.
func (c *Coordinator) pendingPurge() *pendingPurge {
	if len(c.held) == 0 {
		return nil
	}
	keys := make([]string, 0, len(c.held))
	for k := range c.held {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return &pendingPurge{commit: c.heldCommit, removed: len(keys), total: c.engine.Len(), keys: keys[:min(len(keys), 1000)]}
}

// dirtyPurge queues the held removals and the window for the next persist.
// Caller holds c.mu.
func (c *Coordinator) dirtyPurge() {
	held, _ := json.Marshal(struct {
		Commit string               `json:"commit"`
		Keys   map[string]heldEntry `json:"keys"`
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
			c.held[k] = e
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
	var keys []string
	for k := range c.held {
		if c.cat != nil && c.cat.Has(k) {
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
