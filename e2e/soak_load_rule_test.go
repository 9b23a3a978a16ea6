package e2e

import (
	"strings"
	"testing"
)

// The load-bound check catches a node over its share, leaves out the
// nodes that are not members (no weight, not alive) and a node whose disk
// is full, and passes a placement within the bound.
func TestSoakLoadBoundCatchesANodeOverItsShare(t *testing.T) {
	node := func(name string, weight float64, repos int) soakNode {
		return soakNode{Name: name, State: "alive", EffectiveWeight: weight, Repos: repos}
	}
	// Weights 2, 1, 1 share 100 repositories: bounds 63, 32, 32.
	fair := []soakNode{node("a", 2, 50), node("b", 1, 25), node("c", 1, 25)}
	if err := withinLoadBound(fair, 1.25, 0.75); err != nil {
		t.Fatalf("a fair placement: %v", err)
	}
	over := []soakNode{node("a", 2, 30), node("b", 1, 35), node("c", 1, 35)}
	err := withinLoadBound(over, 1.25, 0.75)
	if err == nil || !strings.Contains(err.Error(), "b owns 35 of 100 repositories, its bound is 32") {
		t.Fatalf("b and c over their bound of 32: %v", err)
	}
	// A gone node and one whose disk is full are no members: the others
	// share what they hold.
	gone := node("gone", 1, 0)
	gone.State = "gone"
	full := node("full-disk", 1, 40)
	full.DiskUsed, full.DiskTotal = 90, 100
	if err := withinLoadBound(append([]soakNode{gone, full}, fair...), 1.25, 0.75); err != nil {
		t.Fatalf("with a gone node and a full one: %v", err)
	}
	full.DiskUsed = 10
	if err := withinLoadBound(append([]soakNode{full}, over...), 1.25, 0.75); err == nil {
		t.Fatal("a node with room counted out of the bound")
	}
}
