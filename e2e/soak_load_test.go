package e2e

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// soakLoadFactor is the coordinator's --load-factor (the default): no node
// holds more than this many times its share of the repositories.
const soakLoadFactor = 1.25

// soakDiskLowWater is the share of a node's disk below which the
// coordinator gives it back what it handed back when full (placement's
// default low water).
const soakDiskLowWater = 0.75

// loadBound checks from the API's list of nodes that every placement
// member (effective weight above 0) owns no more repositories than the
// load bound allows it: ceil(factor x weight / total weight x owned
// repositories). A node whose disk is above the low water mark hands
// repositories back to the others, who may hold them on top of their
// bound: it is left out, with what it owns, and the bound applies among
// the rest.
func (c *soakChecker) loadBound() error {
	nodes, err := c.nodes()
	if err != nil {
		return err
	}
	return withinLoadBound(nodes, soakLoadFactor, soakDiskLowWater)
}

// withinLoadBound is loadBound's rule on one list of nodes.
func withinLoadBound(nodes []soakNode, factor, lowWater float64) error {
	var members []soakNode
	var total float64
	n := 0
	for _, nd := range nodes {
		if nd.EffectiveWeight <= 0 || nd.State != "alive" {
			continue
		}
		if nd.DiskTotal > 0 && float64(nd.DiskUsed) > lowWater*float64(nd.DiskTotal) {
			continue // full: its repositories are the others' to hold
		}
		members = append(members, nd)
		total += nd.EffectiveWeight
		n += nd.Repos
	}
	var over []string
	for _, m := range members {
		if bound := int(math.Ceil(factor * m.EffectiveWeight / total * float64(n))); m.Repos > bound {
			over = append(over, fmt.Sprintf("%s owns %d of %d repositories, its bound is %d (weight %g of %g, load factor %g)",
				m.Name, m.Repos, n, bound, m.EffectiveWeight, total, factor))
		}
	}
	slices.Sort(over)
	if len(over) > 0 {
		return fmt.Errorf("over the load bound: %s", strings.Join(over, "; "))
	}
	return nil
}
