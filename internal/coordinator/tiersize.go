package coordinator

import (
	"math"
	"strings"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Repository sizes, which weigh the units of the full tier (tier.go). The
// nodes report a repository's bytes on disk with a check that changed its
// mirror (CheckResult.size_bytes): the owner after its fetch, a full node
// after its pull. The coordinator keeps each as 16 bits in the placement
// engine's record of the key, which has them spare, so sizes cost it
// nothing a repository (BenchmarkPlace1M), and in the repository's stored
// record, so that a restarted coordinator weighs the tier as before.
//
// A volunteer may lie about the size of what it owns. A full node's figure
// (it holds the full token) replaces an owner's and is never replaced by
// one, and an owner's is capped at ownerSizeCap: until a full node pulled
// the repository, a liar can make it weigh anything from sizeFloor to
// ownerSizeCap, and from then on nothing.

// Sizes, in bytes.
const (
	// sizeFloor is the least a repository weighs, known or not: an empty
	// mirror still holds git's files and costs a copy.
	sizeFloor = 64 << 10
	// ownerSizeCap bounds the size an owner (not a full node) reports.
	ownerSizeCap = 1 << 30
)

// A packed size: bit 0 says a full node reported it; the other 15 bits
// are 0 for no size, or c for 1 KiB × 2^((c-1)/sizeSteps), to 0.07%.
const (
	sizeFull  = 1
	sizeSteps = 512
)

// packSize packs bytes (0: none) as a size, from a full node or not.
func packSize(bytes uint64, full bool) uint16 {
	if bytes == 0 {
		return 0
	}
	c := 1 + math.Round(sizeSteps*math.Log2(max(float64(bytes)/1024, 1)))
	p := uint16(min(c, 1<<15-1)) << 1
	if full {
		p |= sizeFull
	}
	return p
}

// sizeBytes is a packed size's bytes, 0 for none.
func sizeBytes(p uint16) uint64 {
	c := p >> 1
	if c == 0 {
		return 0
	}
	return uint64(math.Round(1024 * math.Exp2(float64(c-1)/sizeSteps)))
}

// reportedSize records the size node id reported of key (0: none), with
// whether it is a full node. Caller holds c.mu.
func (c *Coordinator) reportedSize(id uint32, full bool, key repokey.Key, bytes uint64) {
	if bytes == 0 {
		return
	}
	had := c.engine.Size(key)
	if !full {
		if had&sizeFull != 0 {
			return // a full node's figure stands
		}
		bytes = min(bytes, ownerSizeCap)
	}
	p := packSize(bytes, full)
	if p == had || !c.engine.SetSize(key, p) {
		return
	}
	c.statusOf(key) // the stored record keeps the size
	c.dirty[key] = true
	c.tierTouch(key)
}

// tierUnitBytes is unit's weight by bytes, in KiB: the sizes of its
// repositories that the engine has, each at least sizeFloor; 0 if it has
// none. A fork network's members report their own objects, and its pool
// is counted in them once (the full node counts it with the member it
// pulled first). Caller holds c.mu.
func (c *Coordinator) tierUnitBytes(unit string) int {
	var keys []repokey.Key
	name, network := strings.CutPrefix(unit, tierUnitPrefix)
	if network {
		keys = c.nets.Members(name)
	} else if k, ok := c.engine.Key(unit); !ok || c.nets.Of(k) != "" {
		return 0
	} else {
		keys = []repokey.Key{k}
	}
	var kib uint64
	for _, k := range keys {
		if c.engine.Has(k) {
			kib += max(sizeBytes(c.engine.Size(k)), sizeFloor) / 1024
		}
	}
	return int(kib)
}

// sizeHysteresis is the factor by which a unit's bytes must change before
// the tier weighs it anew: a repository that grows does not move the
// others at each fetch.
const sizeHysteresis = 2

// tierUnitWeight is unit's weight now: its bytes in KiB (tierUnitBytes),
// or its weight in the tier while its bytes are within sizeHysteresis of
// that; 0 if it is no longer a unit. Caller holds c.mu.
func (c *Coordinator) tierUnitWeight(unit string) int {
	w := c.tierUnitBytes(unit)
	if old := c.tier.WeightOf(unit); w > 0 && old > 0 && w < sizeHysteresis*old && old < sizeHysteresis*w {
		return old
	}
	return w
}

// tierAllBytes is the bytes of every repository, each at least
// sizeFloor: what each full node holds while every one holds everything.
// It walks every key (a few ms at a million). Caller holds c.mu.
func (c *Coordinator) tierAllBytes() uint64 {
	var n uint64
	c.engine.EachSize(func(p uint16) { n += max(sizeBytes(p), sizeFloor) })
	return n
}

// isFull reports whether node id is a full node (granted, not revoked).
// Caller holds c.mu.
func (c *Coordinator) isFull(id uint32) bool {
	rec := c.nodes[id]
	return rec != nil && rec.full()
}
