package gitserve

import (
	"context"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// SetBeforeRun sets the function a shared run calls once it has its slot,
// before git starts: tests hold runs there.
func SetBeforeRun(h *Handler, f func(key string)) { h.beforeRun = f }

// SetBeforeAnswer sets the function the run of a shared answer (a refs
// advertisement, an ls-refs listing) calls once it has its slot.
func SetBeforeAnswer(h *Handler, f func(key string)) { h.beforeAnswer = f }

// SharedRuns counts the git runs that shared answers took, and those of
// the wants checks.
func SharedRuns(h *Handler) (answers, checks int64) {
	return h.shares.answers.Load(), h.shares.checks.Load()
}

// RacyMargin is how old the refs must be for a stat of them to stand for a
// read.
const RacyMargin = racyMargin

// RefsReads counts the reads of repositories' refs (the others were stats).
func RefsReads(h *Handler) int64 {
	h.init()
	return h.views.reads.Load()
}

// CheckWants is the check of a request's wants alone (checkWants, with no
// recently advertised tips), for benchmarks.
func CheckWants(ctx context.Context, git *gitcmd.Runner, dir string, wants []string) error {
	_, err := checkWants(ctx, git, dir, wants, nil)
	return err
}

// UnreachedHaves counts the haves that the served refs of dir do not
// reach (unreachedHaves), for benchmarks.
func UnreachedHaves(ctx context.Context, git *gitcmd.Runner, dir string, haves []string) (int, error) {
	unreached, _, err := unreachedHaves(ctx, git, dir, haves)
	return len(unreached), err
}

// ObjectTypes is the one cat-file that every check starts with.
func ObjectTypes(ctx context.Context, git *gitcmd.Runner, dir string, oids []string) error {
	return objectTypes(ctx, git, dir, oids, func(string, string) {})
}

// ReadCapabilities reads what the served git advertises (capsTemplate), as
// the first request of a process does: benchmarks that make a Handler a
// round read it before they measure.
func ReadCapabilities(ctx context.Context, h *Handler) error {
	h.init()
	_, err := h.capsFor(ctx, 40)
	return err
}
