package node

// maxEarly bounds the checks a node remembers for repositories it has not
// been assigned yet.
const maxEarly = 10000

// askedEarly remembers a check asked for key (with its task, if any)
// before key's assignment arrived: the coordinator sends a check at once,
// but the assignments of a large catalog in batches, so an on-demand
// check of a repository just added can overtake its assignment. It is
// applied when the assignment comes (takeEarly). Caller holds n.mu.
func (n *Node) askedEarly(key, taskID string) {
	ids, ok := n.early[key]
	if !ok && len(n.early) >= maxEarly {
		n.log.Warn("too many checks asked for repositories not assigned yet: this one is dropped", "key", key, "task", taskID)
		return
	}
	if taskID != "" {
		ids = append(ids, taskID)
	}
	n.early[key] = ids
}

// takeEarly moves the checks asked for key before its assignment to o,
// and reports whether there were any. Caller holds n.mu.
func (n *Node) takeEarly(key string, o *owned) bool {
	ids, ok := n.early[key]
	if !ok {
		return false
	}
	delete(n.early, key)
	o.taskIDs = append(o.taskIDs, ids...)
	return true
}
