package coordinator

import (
	"context"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// pulled is a full node's result of a pull of key that changed its mirror,
// which then measures size bytes.
func pulled(key string, size uint64) *fleetv1.CheckResult {
	return &fleetv1.CheckResult{Key: key, Ok: true, Served: true, Changed: true, SizeBytes: size}
}

// withinStep reports whether got is want to the precision sizes are kept
// at (a 512th of a doubling, and a KiB).
func withinStep(got, want uint64) bool {
	return float64(got) >= float64(want)*0.998-1024 && float64(got) <= float64(want)*1.002+1024
}

// The sizes full nodes report weigh the tier's units: a repository of
// 100 GB weighs as much as a hundred thousand of 1 MB, a fork network its
// members' sum, one not yet measured 64 KiB; and /api/v1/nodes shows
// each full node's bytes, twice the fleet's between them.
func TestTheFullTierWeighsRepositoriesByTheBytesFullNodesReport(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 3, keys)
	id := full[0].GetNodeId()
	var total uint64
	c.mu.Lock()
	for i, k := range keys {
		size := uint64(1 << 20)
		switch {
		case i == 0:
			size = 100e9
		case i == 1:
			size = 0 // not measured
		}
		c.result(id, pulled(k, size))
		total += max(size, sizeFloor)
	}
	c.decide()
	big := c.tier.WeightOf(c.tierUnit(repokey.Key(keys[0])))
	small := c.tier.WeightOf(c.tierUnit(repokey.Key(keys[2])))
	unmeasured := c.tier.WeightOf(c.tierUnit(repokey.Key(keys[1])))
	linux := c.tier.WeightOf(c.tierUnit("example.org/linux/tree0"))
	c.mu.Unlock()
	if !withinStep(uint64(big)*1024, 100e9) || small != 1024 || unmeasured != 64 || linux != 4*1024 {
		t.Fatalf("weights in KiB: 100 GB %d, 1 MiB %d, unmeasured %d, a network of four of 1 MiB %d; want 97656250, 1024, 64, 4096",
			big, small, unmeasured, linux)
	}
	nodes, err := c.ListNodes(as(full[0]), &fleetv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var sum, most uint64
	for _, n := range nodes.GetNodes() {
		sum += n.GetTierBytes()
		most = max(most, n.GetTierBytes())
	}
	if !withinStep(sum, 2*total) || most < 100e9 {
		t.Errorf("/api/v1/nodes: the full nodes' tier_bytes add up to %d, the largest %d; want 2 × %d, and the 100 GB repository in one", sum, most, total)
	}
}

// A volunteer that owns a repository may say it is of any size: its
// figure is capped at 1 GiB, and once a full node reported the size, the
// owner's figures no longer count.
func TestAnOwnersSizeIsCappedAndGivesWayToAFullNodes(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 3, keys)
	key := keys[5]
	owner := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "volunteer", Capacity: 1})
	c.mu.Lock()
	defer c.mu.Unlock()
	connect(c, owner)
	weight := func() uint64 { c.decide(); return uint64(c.tier.WeightOf(c.tierUnit(repokey.Key(key)))) * 1024 }
	c.reportedSize(owner.GetNodeId(), c.isFull(owner.GetNodeId()), repokey.Key(key), 1e15)
	if w := weight(); !withinStep(w, ownerSizeCap) {
		t.Fatalf("an owner said 1 PB: weighs %d bytes, want the cap %d", w, uint64(ownerSizeCap))
	}
	c.result(full[1].GetNodeId(), pulled(key, 300e6))
	if w := weight(); !withinStep(w, 300e6) {
		t.Fatalf("a full node measured 300 MB: weighs %d bytes", w)
	}
	c.reportedSize(owner.GetNodeId(), false, repokey.Key(key), 1e15)
	c.reportedSize(owner.GetNodeId(), false, repokey.Key(key), 1)
	if w := weight(); !withinStep(w, 300e6) {
		t.Errorf("the owner spoke again after a full node: weighs %d bytes, want the full node's 300 MB", w)
	}
}

// A unit is weighed anew only when its bytes double or halve: a
// repository that grows by half moves nothing.
func TestARepositorysGrowthMovesItsUnitOnlyPastAFactorOfTwo(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 3, keys)
	key, id := keys[7], full[2].GetNodeId()
	c.mu.Lock()
	defer c.mu.Unlock()
	weight := func(size uint64) int {
		c.result(id, pulled(key, size))
		c.decide()
		return c.tier.WeightOf(c.tierUnit(repokey.Key(key)))
	}
	w0 := weight(100 << 20)
	if !withinStep(uint64(w0)*1024, 100<<20) {
		t.Fatalf("100 MiB weighs %d KiB", w0)
	}
	for _, size := range []uint64{150 << 20, 199 << 20, 51 << 20} {
		if w := weight(size); w != w0 {
			t.Errorf("grown to %d MiB from 100: weighs %d KiB, want the %d it weighed", size>>20, w, w0)
		}
	}
	if w := weight(201 << 20); !withinStep(uint64(w)*1024, 201<<20) {
		t.Errorf("grown to 201 MiB, past twice the 100 it weighed: weighs %d KiB", w)
	}
}

// The sizes are stored with the repositories: a restarted coordinator
// weighs the tier as before, and moves nothing, before any node reports.
func TestARestartedCoordinatorWeighsTheTierAsBefore(t *testing.T) {
	dir := t.TempDir()
	c := newTestCoordinator(t, dir, testJoin, testFull)
	keys := tierKeys()
	full := tierFleet(t, c, 3, keys)
	c.mu.Lock()
	for i, k := range keys {
		c.result(full[0].GetNodeId(), pulled(k, uint64(1+i*i*i)<<20))
		c.result(full[0].GetNodeId(), &fleetv1.CheckResult{Key: k, Ok: true}) // a status to store
	}
	c.decide()
	before := map[string]int{}
	for _, k := range keys {
		before[k] = c.tier.WeightOf(c.tierUnit(repokey.Key(k)))
	}
	c.mu.Unlock()
	if err := c.persist(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = newTestCoordinator(t, dir, testJoin, testFull)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if w := c.tier.WeightOf(c.tierUnit(repokey.Key(k))); w != before[k] {
			t.Errorf("%s weighs %d KiB after the restart, %d before", k, w, before[k])
		}
	}
}
