package coordinator

import (
	"context"
	"time"

	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A repository renamed upstream (or transferred) keeps its key here: the
// catalog names the old path, and what the mirror holds is the same
// repository's history. Two witnesses say so. A forge's feed answers a
// lookup of the old path under a new name (GitHub's nameWithOwner, a REST
// lookup's redirect): the forge's own word, read by forge and checked as
// a key of the same host. An owner's check meets a redirect from the git
// server (CheckResult.renamed_to, read by repokey.Redirect on the node and
// checked again here, as a node's word is): the git server's word, which
// may name another host; that key is shown and never followed. The state
// is renamed, RepoState.renamed_to its new name, since the first sight.
// Kept in memory, as the forges' flags are: the feed's next answer, or
// the owner's next check, brings it back after a restart.
//
// The forge's stable number of a repository (forgeIDs: GitHub's
// databaseId, GitLab's project id, Gitea's and Gitee's id) tells a rename
// from a repository deleted and made anew under the old name: a rename
// keeps the number (the forge answers the old path under the new name,
// same number), a new repository has another (the forge answers the old
// path under the old name, another number). The second is logged, and
// ends a rename the key carried: the name is a new repository's now, which
// the owner's checks mirror as any change of refs.
type rename struct {
	to    string // the new key
	since int64  // unix ms: first seen
	byGit bool   // the git server's redirect said so, not a forge
}

// setRenamed records that key's upstream answers as to, as seen at at
// (unix ms), and tells the full nodes when that is news. Caller holds
// c.mu.
func (c *Coordinator) setRenamed(key repokey.Key, to string, byGit bool, at int64) {
	old, had := c.renames[key]
	if had && old.to == to {
		if !byGit && old.byGit {
			old.byGit = false // the forge says so too: its word stands
			c.renames[key] = old
		}
		return
	}
	c.renames[key] = rename{to: to, since: at, byGit: byGit}
	sameHost := repokey.Host(to) == key.Host()
	c.log.Info("a repository was renamed upstream", "key", key, "to", repokey.Redact(to), "same_host", sameHost, "by_git_redirect", byGit,
		"before", old.to)
	c.broadcastState(key)
}

// clearRenamed ends key's rename: its upstream answers under its own name
// again (the forge's answer names it so, or, for a git server's redirect,
// a check succeeded at the old path). Caller holds c.mu.
func (c *Coordinator) clearRenamed(key repokey.Key, byGit bool) {
	old, had := c.renames[key]
	if !had || old.byGit != byGit {
		return
	}
	delete(c.renames, key)
	c.log.Info("a renamed repository answers under its own name again", "key", key, "was_renamed_to", repokey.Redact(old.to))
	c.broadcastState(key)
}

// feedRenames records what a feed's answer said of the keys it asked
// about: renamed (by key, the new key on the same host), the forge's
// numbers (ids, by key), and the keys answered under their own name
// (same: a rename they carried from the forge is over).
func (c *Coordinator) feedRenames(renamed map[string]string, ids map[string]int64, same []string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, id := range ids {
		k, ok := c.engine.Key(name) // the engine's copy: a million numbers add no copy of their keys
		if !ok {
			continue
		}
		old, had := c.forgeIDs[k]
		c.forgeIDs[k] = id
		if had && old != id {
			_, moved := renamed[name]
			c.log.Warn("forge feed: the repository's number changed: a repository made anew under the name, not a rename; the key mirrors the new one",
				"key", k, "id", id, "before", old, "renamed", moved)
			if !moved {
				c.clearRenamed(k, false)
			}
		}
	}
	for name, to := range renamed {
		if k, ok := c.engine.Key(name); ok {
			c.setRenamed(k, to, false, now.UnixMilli())
		}
	}
	for _, name := range same {
		if k, ok := c.engine.Key(name); ok {
			c.clearRenamed(k, false)
		}
	}
}

// checkRenamed reads a check result's renamed_to (a node's word: checked
// as a key again): a redirect the owner met marks the key renamed; a
// check that succeeded at the old path ends a rename a redirect said.
// Caller holds c.mu.
func (c *Coordinator) checkRenamed(key repokey.Key, ok bool, to string, at int64) {
	switch {
	case ok:
		c.clearRenamed(key, true)
	case to != "":
		k, err := c.cfg.Fold.Canonical(to)
		if err != nil || k == key {
			c.log.Warn("result: ignored a redirect that is no other key", "key", key, "err", err)
			return
		}
		if r, had := c.renames[key]; had && !r.byGit {
			return // the forge's word stands over a git server's
		}
		c.setRenamed(key, k.String(), true, at)
	}
}

// maxAsksByID bounds the lookups by number one answer of a feed brings:
// each is a request of the host's budget.
const maxAsksByID = 5

// feedAskByID asks f's forge, where it can (forge.ByID: GitLab, Gitea),
// about the missing paths of an answer by the number it last gave them:
// a repository whose old path answers 404 (its redirect gone, or never
// kept) is found under its new name by its number. It returns the renames
// found; a failed or refused lookup finds none.
func (c *Coordinator) feedAskByID(ctx context.Context, f *feedHost, missing []string) []forge.Rename {
	by, ok := f.client.(forge.ByID)
	if !ok || len(missing) == 0 {
		return nil
	}
	var found []forge.Rename
	asked := 0
	for _, path := range missing {
		k, err := c.cfg.Fold.Canonical(f.host + "/" + path)
		if err != nil {
			continue
		}
		c.mu.Lock()
		id := c.forgeIDs[k]
		c.mu.Unlock()
		if id == 0 {
			continue
		}
		if asked++; asked > maxAsksByID {
			break // the next answers ask the rest
		}
		a, _, err := by.PushedAtByID(ctx, path, id)
		if err != nil {
			c.log.Debug("forge feed: a lookup by number failed", "host", f.host, "key", k, "id", id, "err", err)
			continue
		}
		for _, r := range a.IDs {
			if r.ID != id {
				continue // another number: not the repository the key was
			}
			for _, rn := range a.Renamed {
				if rn.From == path {
					found = append(found, rn)
				}
			}
		}
	}
	return found
}
