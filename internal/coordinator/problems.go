package coordinator

import "github.com/gitfleet/gitfleet/internal/catalog"

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
