package api

import "github.com/gitfleet/gitfleet/internal/catalog"

// Summary names what purge protection holds in one line: the count, the
// first catalog.HeldShown keys, and how many more there are.
func (p *PendingPurge) Summary() string {
	return catalog.HeldSummary(p.Removed, p.Total, p.Commit, p.Keys)
}
