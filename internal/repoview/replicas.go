package repoview

import (
	"encoding/binary"
	"slices"

	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// replicaSet is an index into a replicaSets table; 0 is the empty set.
type replicaSet uint32

// replicaSets interns the full tier's replica sets (RepoState.replicas):
// with N full nodes and R replicas there are at most N choose R of them
// (190 for 20 nodes and 2 replicas), however many repositories there are.
// Sets that no repository uses any more are kept: membership changes make
// a few new ones at a time.
type replicaSets struct {
	sets  [][]uint32            // by index; sets[0] is unused (the empty set)
	index map[string]replicaSet // the set's IDs, 4 bytes each, -> index
}

// id returns the index of set (in the order given), adding it if new.
func (t *replicaSets) id(set []uint32) replicaSet {
	if len(set) == 0 {
		return 0
	}
	b := make([]byte, 0, 4*len(set))
	for _, id := range set {
		b = binary.BigEndian.AppendUint32(b, id)
	}
	if i, ok := t.index[string(b)]; ok {
		return i
	}
	if t.index == nil {
		t.index, t.sets = map[string]replicaSet{}, [][]uint32{nil}
	}
	i := replicaSet(len(t.sets))
	t.sets = append(t.sets, slices.Clone(set))
	t.index[string(b)] = i
	return i
}

// members returns a copy of set i (nil for the empty set).
func (t *replicaSets) members(i replicaSet) []uint32 {
	if i == 0 || int(i) >= len(t.sets) {
		return nil
	}
	return slices.Clone(t.sets[i])
}

// HeldElsewhere tells whether a replica of key other than self holds it
// (served: one confirmed it) and holds the recorded state (current: one
// confirmed it and reports the recorded digest), as the coordinator's
// replica states say (a replica they do not name holds it).
func (t *View) HeldElsewhere(key repokey.Key, self uint32) (served, current bool) {
	v, ok := t.Entry(key)
	if !ok || v.replicas == 0 {
		return false, false
	}
	var differing []*fleetv1.ReplicaState
	if v.extra != nil {
		differing = v.extra.differing
	}
	for _, id := range t.sets.sets[v.replicas] {
		if id == self {
			continue
		}
		i := slices.IndexFunc(differing, func(s *fleetv1.ReplicaState) bool { return s.GetNode() == id })
		switch {
		case i < 0:
			return true, true
		case differing[i].GetConfirmed():
			served = true
		}
	}
	return served, false
}
