package coordinator

import (
	"slices"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// maxProblemLines bounds the catalog problems the coordinator keeps to
// show (the console's catalog page); the count covers them all.
const maxProblemLines = 100

// problemLines are the first of problems as "file:line: reason".
func problemLines(problems []catalog.Problem) []string {
	out := make([]string, 0, min(len(problems), maxProblemLines))
	for _, p := range problems[:min(len(problems), maxProblemLines)] {
		out = append(out, p.String())
	}
	return out
}

// setProblems logs and keeps the problems of the catalog applied: at each
// catalog change and at a restart, whose options (the egress policy) may
// refuse entries the last run accepted. Caller holds c.mu (or is
// restoring).
func (c *Coordinator) setProblems(problems []catalog.Problem) {
	for _, p := range problems {
		c.log.Warn("catalog entry skipped", "problem", p.String())
	}
	c.problems = len(problems)
	c.problemLines = problemLines(problems)
}

// listed are those of keys that the catalog applied lists. Caller holds
// c.mu (or is restoring).
func (c *Coordinator) listed(keys []repokey.Key) []repokey.Key {
	return slices.DeleteFunc(keys, func(k repokey.Key) bool { return c.cat == nil || !c.cat.Has(k.String()) })
}
