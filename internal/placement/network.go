package placement

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// Fork networks (package network says which keys are in one) are placed
// whole: the unit the ring places is the network, at the position of its
// name and weighted by its members, so every member has the same desired
// owner, and a network moves at once (each member make-before-break, its
// old owner dropping it once the new owner confirmed it). A network larger
// than a part (Config.NetworkShare of the smallest member's bound) is split
// by members into parts, each placed as a unit: a key's part is a jump
// consistent hash of the key over the number of parts, so a member joining
// or leaving moves no other member between parts unless the number of
// parts changes. With one member there is nothing to split over.
// Overrides and refusals stay per key: a member handed back (full disk) or
// refused goes, like a standalone key, to the next member clockwise from
// its network's position, where the rest of its network would go too.

// DefaultNetworkShare: a network part holds at most half the keys the
// smallest member may hold.
const DefaultNetworkShare = 0.5

// netState is what the engine knows of a network.
type netState struct {
	size  int // member keys in the key set
	parts int // the parts it is split into (1: whole)
}

// SetNetworks sets the network of keys (name -> network; "" makes a key
// standalone): a key in a network is placed with the other members of its
// network (part). Keys not in the key set yet are remembered for when
// they are added. It takes time in proportion to the keys given, unless
// the load bound, or a network's split changing, makes it place every key
// again.
func (e *Engine) SetNetworks(networks map[repokey.Key]string) {
	var changed []int32
	for _, k := range slices.Sorted(maps.Keys(networks)) {
		name := networks[k]
		if k == "" || e.netOf[k] == name {
			continue
		}
		i, present := e.index.get(e.keys, k)
		if present {
			if e.ring != nil {
				e.held[e.rank[e.keys[i].place]]--
			}
			e.leaveNet(i)
		}
		if name == "" {
			delete(e.netOf, k)
		} else {
			e.netOf[k] = name
		}
		if present {
			e.joinNet(i)
			changed = append(changed, i)
		}
	}
	if len(changed) == 0 || e.ring == nil {
		return
	}
	if !e.plain || !e.partsStable() {
		e.replace()
		return
	}
	for _, i := range changed {
		id, _ := e.ring.Lookup(e.unit(i))
		e.keys[i].place = id
		e.held[e.rank[id]]++
	}
	for _, i := range changed {
		if j := e.rank[e.keys[i].place]; e.held[j] > e.bound(j, len(e.keys)) {
			e.replace()
			return
		}
	}
	for _, i := range changed {
		e.apply(i)
	}
}

// Network returns the network of key ("" if standalone), the pool its
// node keeps it in (the network's name, or "NAME#P" for part P of a split
// network) and the number of parts (1 for a whole network, 0 for a
// standalone key).
func (e *Engine) Network(key repokey.Key) (name, pool string, parts int) {
	i, ok := e.index.get(e.keys, key)
	if !ok || !e.keys[i].inNet {
		return "", "", 0
	}
	name = e.netOf[key]
	return name, e.unit(i), e.nets[name].parts
}

// Resplit returns, and forgets, the networks whose number of parts
// changed since the last call, sorted: each member's pool (Network) may
// have changed while its owner stayed, so its owner must be told.
func (e *Engine) Resplit() []string {
	names := slices.Sorted(maps.Keys(e.resplits))
	e.resplits = nil
	return names
}

// joinNet counts key i in its network, if it has one.
func (e *Engine) joinNet(i int32) {
	name, ok := e.netOf[e.keys[i].key]
	if !ok {
		return
	}
	e.keys[i].inNet = true
	ns := e.nets[name]
	if ns == nil {
		ns = &netState{parts: 1}
		e.nets[name] = ns
	}
	e.resize(ns, ns.size+1)
}

// leaveNet takes key i out of its network's count.
func (e *Engine) leaveNet(i int32) {
	if !e.keys[i].inNet {
		return
	}
	e.keys[i].inNet = false
	name := e.netOf[e.keys[i].key]
	ns := e.nets[name]
	e.resize(ns, ns.size-1)
	if ns.size == 0 {
		delete(e.nets, name)
	}
}

// resize sets a network's size, keeping the count of networks by size.
func (e *Engine) resize(ns *netState, size int) {
	if ns.size > 0 {
		if e.sizes[ns.size]--; e.sizes[ns.size] == 0 {
			delete(e.sizes, ns.size)
		}
	}
	ns.size = size
	if size > 0 {
		e.sizes[size]++
	}
	if partsFor(size, e.netLimit) != ns.parts {
		e.resplit = true
	}
}

// unit is the name of the unit key i is placed as: its key, or its
// network's (part's) name.
func (e *Engine) unit(i int32) string {
	k := &e.keys[i]
	if !k.inNet {
		return string(k.key)
	}
	name := e.netOf[k.key]
	ns := e.nets[name]
	if ns.parts <= 1 {
		return name
	}
	return fmt.Sprintf("%s#%d", name, jump(ring.Hash(string(k.key)), ns.parts)+1)
}

// partLimit is the most members a network part may have: NetworkShare of
// the smallest member's bound, at least 1; 0 (no limit) with fewer than two
// members.
func (e *Engine) partLimit() int {
	if len(e.members) < 2 {
		return 0
	}
	least := math.MaxInt
	for j := range e.members {
		least = min(least, e.bound(j, len(e.keys)))
	}
	return max(1, int(e.cfg.NetworkShare*float64(least)))
}

// partsFor is the number of parts of a network of size members under limit.
func partsFor(size, limit int) int {
	if limit == 0 || size <= limit {
		return 1
	}
	return (size + limit - 1) / limit
}

// partsStable reports whether every network keeps the number of parts it
// was placed with at the current key count and members: then no member
// changes part. It reads one entry per distinct network size.
func (e *Engine) partsStable() bool {
	if e.resplit {
		return false
	}
	limit := e.partLimit()
	if limit == e.netLimit {
		return true
	}
	for size := range e.sizes {
		if partsFor(size, limit) != partsFor(size, e.netLimit) {
			return false
		}
	}
	return true
}

// placeUnits is placeAll with networks: every network part is one unit.
func (e *Engine) placeUnits() {
	for name, ns := range e.nets {
		parts := partsFor(ns.size, e.netLimit)
		if parts != ns.parts {
			if e.resplits == nil {
				e.resplits = map[string]bool{}
			}
			e.resplits[name] = true
		}
		ns.parts = parts
	}
	units := make([]ring.Unit, 0, len(e.keys))
	unitOf := make([]int32, len(e.keys))
	parts := map[string]int32{}
	for i := range e.keys {
		if !e.keys[i].inNet {
			unitOf[i] = int32(len(units))
			units = append(units, ring.Unit{Name: string(e.keys[i].key), Weight: 1})
			continue
		}
		name := e.unit(int32(i))
		u, ok := parts[name]
		if !ok {
			u = int32(len(units))
			parts[name] = u
			units = append(units, ring.Unit{Name: name})
		}
		units[u].Weight++
		unitOf[i] = u
	}
	owners, displaced := e.ring.PlaceUnits(units)
	clear(e.held)
	for i := range e.keys {
		id := owners[unitOf[i]]
		e.keys[i].place = id
		e.held[e.rank[id]]++
	}
	e.plain = !displaced
	for j, h := range e.held {
		if h > e.bound(j, len(e.keys)) {
			e.plain = false
		}
	}
}

// jump is the jump consistent hash of Lamping and Veach ("A Fast, Minimal
// Memory, Consistent Hash Algorithm", 2014): a bucket in [0, n) for key,
// such that going from n to n+1 buckets moves only the keys that go to
// the new bucket.
func jump(key uint64, n int) int {
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64(key>>33+1)))
	}
	return int(b)
}
