package node

import (
	"fmt"
	"net/http"
	"sort"
)

// metrics serves the full node's figures in the Prometheus text format:
// repositories by state, how many are current, the nodes by state, open
// tunnels, forged tips by node, its disk (fulldisk.go), the maintenance of its
// mirrors (maintain.go), and whether a catalog change is held back
// by purge protection. The repositories' figures are counters kept as
// states change (counters.go): no walk of the repositories.
func (f *fullNode) metrics(w http.ResponseWriter, r *http.Request) {
	t := f.totals() // kept as states change (counters.go)
	byState, total, current := t.byState, t.total, t.current
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# HELP gitfleet_repos Repositories the mirror holds, by state.")
	fmt.Fprintln(w, "# TYPE gitfleet_repos gauge")
	for _, st := range sortedKeys(byState) {
		fmt.Fprintf(w, "gitfleet_repos{state=%q} %d\n", st, byState[st])
	}
	fmt.Fprintln(w, "# HELP gitfleet_repos_total Repositories the mirror holds.")
	fmt.Fprintln(w, "# TYPE gitfleet_repos_total gauge")
	fmt.Fprintf(w, "gitfleet_repos_total %d\n", total)
	fmt.Fprintln(w, "# HELP gitfleet_repos_current Repositories the full node serves exactly as their owner last saw the upstream.")
	fmt.Fprintln(w, "# TYPE gitfleet_repos_current gauge")
	fmt.Fprintf(w, "gitfleet_repos_current %d\n", current)
	fmt.Fprintln(w, "# HELP gitfleet_tunnels Partial nodes with a tunnel open to this full node.")
	fmt.Fprintln(w, "# TYPE gitfleet_tunnels gauge")
	fmt.Fprintf(w, "gitfleet_tunnels %d\n", len(f.tunnels.Nodes()))
	f.writeMismatchMetrics(w)
	f.writeDiskMetrics(w)
	f.n.writeMaintenanceMetrics(w)
	if nodes, err := f.backend.Nodes(r.Context()); err == nil {
		byNode := map[string]int{}
		for _, n := range nodes {
			byNode[n.State]++
		}
		fmt.Fprintln(w, "# HELP gitfleet_nodes Nodes of the fleet, by state.")
		fmt.Fprintln(w, "# TYPE gitfleet_nodes gauge")
		for _, st := range sortedKeys(byNode) {
			fmt.Fprintf(w, "gitfleet_nodes{state=%q} %d\n", st, byNode[st])
		}
	}
	if cat, err := f.backend.Catalog(r.Context()); err == nil {
		pending := 0
		if cat.Pending != nil {
			pending = 1
		}
		fmt.Fprintln(w, "# HELP gitfleet_catalog_purge_pending 1 while removals held by purge protection (too many within the purge window) wait for confirmation.")
		fmt.Fprintln(w, "# TYPE gitfleet_catalog_purge_pending gauge")
		fmt.Fprintf(w, "gitfleet_catalog_purge_pending %d\n", pending)
		fmt.Fprintln(w, "# HELP gitfleet_catalog_problems Catalog entries skipped as bad.")
		fmt.Fprintln(w, "# TYPE gitfleet_catalog_problems gauge")
		fmt.Fprintf(w, "gitfleet_catalog_problems %d\n", cat.Problems)
	}
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
