package placement

import (
	"slices"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Refuse records that node refused key: its own policy (an egress policy
// stricter than the coordinator's) will not let it fetch the key's URL.
// Until PolicyChanged(node), the key is never offered to node again: a move
// to node ends (node holds nothing of it, so nothing is dropped and its
// slot is free at once), and the key goes to the next member that has not
// refused it, make-before-break if node owned it. When every member has
// refused it the key is unplaceable: nobody is asked to clone it, and an
// owner keeps it until a member can take it. It reports whether the
// refusal is new (false for a repeated one, an unknown key or a node that
// is not a member), so that the caller tells of each refusal once.
func (e *Engine) Refuse(node uint32, key repokey.Key) bool {
	i, ok := e.index.get(e.keys, key)
	if !ok || !e.isMember(node) || slices.Contains(e.refused[key], node) {
		return false
	}
	e.refused[key] = append(e.refused[key], node)
	// A refusal outlasts the disk's overrides: the node is avoided either
	// way, and only a change of its policy brings the key back.
	if ex := slices.DeleteFunc(e.overrides[key], func(id uint32) bool { return id == node }); len(ex) == 0 {
		delete(e.overrides, key)
	} else {
		e.overrides[key] = ex
	}
	if e.keys[i].target == node {
		e.endMove(i)
	}
	e.apply(i)
	return true
}

// PolicyChanged lifts node's refusals: its policy may have changed (a node
// tells it by opening a new session, as a node's policy is set when it
// starts). The keys it refused are placed again, and may return to it.
// It returns those keys, sorted.
func (e *Engine) PolicyChanged(node uint32) []repokey.Key {
	var lifted []repokey.Key
	for k, no := range e.refused {
		if !slices.Contains(no, node) {
			continue
		}
		lifted = append(lifted, k)
		if no = slices.DeleteFunc(no, func(id uint32) bool { return id == node }); len(no) == 0 {
			delete(e.refused, k)
		} else {
			e.refused[k] = no
		}
	}
	slices.Sort(lifted) // the same queue order whatever the map's
	for _, k := range lifted {
		if i, ok := e.index.get(e.keys, k); ok {
			e.apply(i)
		}
	}
	return lifted
}

// Unplaceable reports whether every member refused key: nobody can
// mirror it until a member's policy changes or a member joins.
func (e *Engine) Unplaceable(key repokey.Key) bool {
	if len(e.refused[key]) == 0 || e.ring == nil {
		return false
	}
	i, ok := e.index.get(e.keys, key)
	return ok && e.want(i) == 0
}

// Refused returns the keys that some member refused, sorted: the keys whose
// placement a refusal or its lifting can change (O(refused keys)).
func (e *Engine) Refused() []repokey.Key {
	keys := make([]repokey.Key, 0, len(e.refused))
	for k := range e.refused {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// UnplaceableCount returns the number of keys every member refused
// (O(refused keys)).
func (e *Engine) UnplaceableCount() int {
	n := 0
	for k := range e.refused {
		if e.Unplaceable(k) {
			n++
		}
	}
	return n
}
