package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// ErrPullTooLarge marks a verified pull whose fetch from the source was
// stopped by MaxRepoSize (or git's memory limit): the source served more
// than the mirror may hold, or the mirror already holds that much. Nothing
// of it was kept.
var ErrPullTooLarge = errors.New("the pull would pass --max-repo-size")

// fetchQuarantine fetches the source's branches and tags into the
// quarantine q, whose objects add to those of the mirror at dir (none on
// a first pull), under the same bound as a fetch from an upstream: the
// size of the mirror and of the quarantine is read every WatchInterval
// while the pack streams in, git's process group is killed when it passes
// MaxRepoSize, and a fetch that completed within one interval is measured
// once done. Like every git process it is also bounded by the runner's
// timeout (--git-timeout). The caller deletes q.
func (s *Store) fetchQuarantine(ctx context.Context, key repokey.Key, dir, q string, src Source, first bool) error {
	// The source is a peer's copy (a node's, through the full node's tunnel
	// proxy), not an upstream: it does not go through the egress policy.
	c := gitcmd.Cmd{GitDir: q, Name: "fetch", Config: FsckConfig(), Env: src.Env, Peer: true,
		Flags: []string{"--no-write-fetch-head", "--no-tags", "--quiet", "--no-auto-gc"},
		Args:  append([]string{src.URL}, gitcmd.FetchRefspecs...)}
	limit := s.limits.MaxRepoSize
	if limit <= 0 {
		if err := s.git.Run(ctx, c); err != nil {
			return fmt.Errorf("mirror %s: fetch into quarantine: %w", key, err)
		}
		return nil
	}
	var base int64
	if !first {
		var err error
		if base, err = TreeSize(dir); err != nil {
			return fmt.Errorf("mirror %s: size: %w", key, err)
		}
		if over(base, limit) {
			return fmt.Errorf("mirror %s: %w: %w", key, ErrPullTooLarge, tooLarge(src.URL, base, limit, false))
		}
	}
	// Every object then arrives as a pack (no loose objects), and the
	// quarantine holds only what this fetch brought.
	c.Config = append(c.Config, "fetch.unpackLimit=1")
	size := func() int64 {
		n, _ := TreeSize(q) // what it could read
		return base + n
	}
	err := s.watch(ctx, c, size, limit)
	if err == nil {
		if n := size(); over(n, limit) {
			err = tooLarge(src.URL, n, limit, true)
		}
	}
	switch {
	case err == nil:
		return nil
	case gitcmd.ClassOf(err) == gitcmd.ClassTooLarge:
		return fmt.Errorf("mirror %s: %w: %w", key, ErrPullTooLarge, err)
	default:
		return fmt.Errorf("mirror %s: fetch into quarantine: %w", key, err)
	}
}
