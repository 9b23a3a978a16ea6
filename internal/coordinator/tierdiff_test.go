package coordinator

import (
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Repositories added and removed one at a time, alone and in a fork
// network, reach the full tier as the units they change: after each, every
// repository has the replicas a tier given every unit from scratch gives
// it, and the tier never had to be given every unit again.
func TestTheFullTierTakesEachChangeAsTheUnitsItTouches(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := tierFleet(t, c, 3, tierKeys())
	c.mu.Lock()
	fed := c.tierFed
	c.mu.Unlock()
	if !fed {
		t.Fatal("three full nodes and two replicas: the tier was not given the units")
	}
	ctx := as(full[0])
	check := func(step string) {
		t.Helper()
		c.mu.Lock()
		defer c.mu.Unlock()
		c.decide()
		fresh := placement.NewTier(c.tierConfig())
		for u, n := range c.tierUnits() {
			// Weighed as the tier weighs it: its bytes, within hysteresis.
			w := c.tier.WeightOf(u)
			if w*sizeHysteresis <= n || n*sizeHysteresis <= w {
				t.Fatalf("%s: unit %s weighs %d in the tier, its bytes %d KiB", step, u, w, n)
			}
			fresh.SetUnit(u, w)
		}
		fresh.SetMembers(c.tierMembers())
		fresh.Decisions()
		if c.tier.Len() != fresh.Len() {
			t.Fatalf("%s: the tier has %d units, want %d", step, c.tier.Len(), fresh.Len())
		}
		c.engine.Each(func(k repokey.Key, _, _ uint32, _ bool) {
			if got, want := c.replicas(k), fresh.Where(c.tierUnit(k)); !slices.Equal(got, want) {
				t.Fatalf("%s: %s on %v, want %v as placed from scratch", step, k, got, want)
			}
		})
	}
	add := func(key, network string) {
		t.Helper()
		var attrs map[string]string
		if network != "" {
			attrs = map[string]string{catalog.AttrNetwork: network}
		}
		if _, err := c.AddRepo(ctx, &fleetv1.AddRepoRequest{Url: "https://" + key, Attrs: attrs}); err != nil {
			t.Fatalf("add %s: %v", key, err)
		}
		check("add " + key)
	}
	add("example.org/g/new0", "")
	add("example.org/linux/tree9", "linux")
	add("example.org/bsd/a", "bsd")
	add("example.org/bsd/b", "bsd")
	for _, k := range []string{"example.org/g/r03", "example.org/linux/tree1", "example.org/bsd/a"} {
		if _, err := c.RemoveRepo(ctx, &fleetv1.RemoveRepoRequest{Key: k}); err != nil {
			t.Fatalf("remove %s: %v", k, err)
		}
		check("remove " + k)
	}
}

// With no more full nodes than replicas the tier holds no unit, and each
// repository's replicas are the full nodes; a third full node gets the
// tier every unit, two replicas each.
func TestWithTwoFullNodesTheTierHoldsNothingPerRepository(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 2, keys)
	c.mu.Lock()
	if n := c.tier.Len(); n != 0 {
		t.Errorf("two full nodes, two replicas: the tier holds %d units, want none", n)
	}
	for _, k := range keys {
		if r := c.replicas(repokey.Key(k)); !sameIDs(r, []uint32{full[0].GetNodeId(), full[1].GetNodeId()}) {
			t.Fatalf("%s: replicas %v, want both full nodes", k, r)
		}
	}
	c.mu.Unlock()
	third := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full2"})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heartbeat(third.GetNodeId(), connect(c, third), &fleetv1.Heartbeat{DiskTotalBytes: 1e12})
	c.decide()
	if n := c.tier.Len(); n != len(tierUnitsOf(keys)) {
		t.Errorf("three full nodes: the tier holds %d units, want %d", n, len(tierUnitsOf(keys)))
	}
	for _, k := range keys {
		if r := c.replicas(repokey.Key(k)); len(r) != 2 || r[0] == r[1] {
			t.Fatalf("%s: replicas %v with three full nodes, want two", k, r)
		}
	}
}

func sameIDs(a, b []uint32) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// tierUnitsOf counts the units of tierKeys: the linux network is one.
func tierUnitsOf(keys []string) map[string]bool {
	units := map[string]bool{}
	for _, k := range keys {
		if slices.Contains([]string{"example.org/linux/tree0", "example.org/linux/tree1", "example.org/linux/tree2", "example.org/linux/tree3"}, k) {
			k = "linux"
		}
		units[k] = true
	}
	return units
}
