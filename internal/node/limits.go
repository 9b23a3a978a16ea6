package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// Limits bound what an upstream can make a node store or spend.
type Limits struct {
	// MaxRepoSize, MaxRefs and MaxRefLength: see mirror.Limits (0: none).
	MaxRepoSize  int64
	MaxRefs      int
	MaxRefLength int
	// GitMemory bounds each git process's data segment (0: none).
	GitMemory int64
	// MaxTreeDepth is git's core.maxTreeDepth, given to a git that knows
	// it (2.43 and later; 0: git's own default).
	MaxTreeDepth int
}

// gitRunner is the node's git, its connections routed as route says, its
// curl traces in tmp (the mirror's, emptied at every start):
// every process bounded by the timeout and the limits, and the tree depth
// bounded where the installed git can.
func gitRunner(route gitcmd.Route, timeout time.Duration, l Limits, tmp string, log *slog.Logger) *gitcmd.Runner {
	opt := gitcmd.Options{Timeout: timeout, MemoryLimit: l.GitMemory, TempDir: tmp}
	if l.GitMemory > 0 && !gitcmd.MemoryLimitSupported {
		log.Warn("--git-memory-limit is not supported on this system: git processes run without a memory limit")
	}
	if l.MaxTreeDepth <= 0 {
		return gitcmd.New(route, opt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := gitcmd.New(gitcmd.LocalOnly(), opt).Version(ctx)
	switch {
	case err != nil:
		log.Warn("could not read the git version: trees of any depth are accepted", "err", err)
	case v.AtLeast(gitcmd.TreeDepthVersion.Major, gitcmd.TreeDepthVersion.Minor):
		opt.MaxTreeDepth = l.MaxTreeDepth
	default:
		log.Warn("this git does not bound tree depth (core.maxTreeDepth needs git "+gitcmd.TreeDepthVersion.String()+"): deep trees are mirrored and served as they are",
			"git", v.String(), "max_tree_depth", l.MaxTreeDepth)
	}
	return gitcmd.New(route, opt)
}

// mirrorLimits are the store's share of the limits.
func (l Limits) mirror() mirror.Limits {
	return mirror.Limits{MaxRepoSize: l.MaxRepoSize, MaxRefs: l.MaxRefs, MaxRefLength: l.MaxRefLength}
}

// OverLimit reports whether err says the repository is over a limit: no
// fallback URL is tried (it is the same repository), and it is checked
// again only after a long wait.
func OverLimit(err error) bool {
	c := gitcmd.ClassOf(err)
	return c == gitcmd.ClassTooLarge || c == gitcmd.ClassTooManyRefs
}
