package placement

import "github.com/gitfleet/gitfleet/internal/repokey"

// Each calls fn for every key with its confirmed owner, its target (0 when
// no move is under way) and whether the assign to the target has been sent
// (a clone in flight). The shell uses it to re-send a node what it holds or
// is cloning when the node's session opens again.
func (e *Engine) Each(fn func(key repokey.Key, owner, target uint32, sent bool)) {
	for i := range e.keys {
		k := &e.keys[i]
		fn(k.key, k.owner, k.target, k.flags&flagSent != 0)
	}
}

// Sent reports whether the assign of key to its target has been sent (a
// clone in flight), as Each does.
func (e *Engine) Sent(key repokey.Key) bool {
	i, ok := e.index.get(e.keys, key)
	return ok && e.keys[i].flags&flagSent != 0
}

// Len returns the number of keys.
func (e *Engine) Len() int { return len(e.keys) }

// Has reports whether key is placed by the engine.
func (e *Engine) Has(key repokey.Key) bool {
	_, _, ok := e.Owner(key)
	return ok
}

// Key returns the engine's Key of key as it is written (a message's, a
// store's), if the engine has it: every key the engine holds was parsed
// where it arrived, so a key found here needs no check of its own, and a
// caller that keeps per-key state for long can keep this copy instead of
// one of its own. A key the engine does not have is not a Key here.
func (e *Engine) Key(key string) (repokey.Key, bool) {
	i, ok := e.index.lookup(e.keys, key)
	if !ok {
		return "", false
	}
	return e.keys[i].key, true
}

// Size returns the figure SetSize kept for key, 0 if none or if the
// engine does not have key.
func (e *Engine) Size(key repokey.Key) uint16 {
	i, ok := e.index.get(e.keys, key)
	if !ok {
		return 0
	}
	return e.keys[i].size
}

// SetSize keeps a 16-bit figure for key (the coordinator's: the
// repository's size, as the full tier weighs it), in its record's spare
// bytes; the engine places nothing by it, and its snapshots leave it out.
// It reports whether key is the engine's.
func (e *Engine) SetSize(key repokey.Key, size uint16) bool {
	i, ok := e.index.get(e.keys, key)
	if ok {
		e.keys[i].size = size
	}
	return ok
}

// EachSize calls fn with every key's SetSize figure (0 for none).
func (e *Engine) EachSize(fn func(size uint16)) {
	for i := range e.keys {
		fn(e.keys[i].size)
	}
}
