package node

import (
	"syscall"
	"time"

	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Disk returns the space the node uses and may use for mirrors: with a
// quota, the size of <data>/repos and of what it keeps beside
// (diskbeside.go), measured at most every 10 s, against the quota;
// otherwise the file system's usage.
func (n *Node) Disk() (used, total uint64) {
	n.diskMu.Lock()
	defer n.diskMu.Unlock()
	return n.diskLocked()
}

// diskLocked is disk for a caller that holds diskMu.
func (n *Node) diskLocked() (used, total uint64) {
	if n.cfg.DiskQuota > 0 {
		// Measured every 10 s (a walk of every mirror). A clone that ended
		// since counts at once: the first mirror is measured (a walk of
		// one), later ones at the average size of those measured.
		held := n.heldCount()
		if now := n.clk.Now(); now.Sub(n.diskAt) >= 10*time.Second || n.diskAt.IsZero() || n.diskHeld == 0 && held > 0 {
			size, _ := mirror.TreeSize(n.mirror.Root()) // what it could read
			n.diskUsed, n.diskAt, n.diskHeld = uint64(size), now, held
			n.diskBesides = n.diskBeside()
		}
		if held > n.diskHeld && n.diskHeld > 0 {
			return n.diskUsed + uint64(held-n.diskHeld)*(n.diskUsed/uint64(n.diskHeld)) + n.diskBesides, uint64(n.cfg.DiskQuota)
		}
		return n.diskUsed + n.diskBesides, uint64(n.cfg.DiskQuota)
	}
	var st syscall.Statfs_t
	if syscall.Statfs(n.cfg.DataDir, &st) != nil {
		return 0, 0
	}
	return (st.Blocks - st.Bavail) * uint64(st.Bsize), st.Blocks * uint64(st.Bsize)
}

// ReserveClone decides whether the node has room for one more mirror and,
// if so, counts the clone as under way until the returned function is
// called. With a quota, the clones under way are counted at the average
// size of the mirrors held (and while no size is known yet, one clone at a
// time), so that parallel clones cannot all slip under the mark at once.
func (n *Node) ReserveClone() (func(), bool) {
	// Measured and reserved under one lock: a measure taken before another
	// clone ended, and the count of mirrors read after, would let a clone
	// slip under the mark.
	n.diskMu.Lock()
	defer n.diskMu.Unlock()
	used, total := n.diskLocked()
	if total == 0 {
		return func() {}, true
	}
	limit := n.cfg.DiskHighWater * float64(total)
	if n.cfg.DiskQuota > 0 {
		held := n.heldCount()
		switch {
		case held > 0:
			used += uint64(n.cloning) * ((used - n.diskBesides) / uint64(held)) // the mirrors' average
		case n.cloning > 0:
			return nil, false // the first clone tells how big a mirror is
		}
	}
	if float64(used) > limit {
		return nil, false
	}
	n.cloning++
	return func() {
		n.diskMu.Lock()
		n.cloning--
		n.diskAt = time.Time{} // measure again
		n.diskMu.Unlock()
	}, true
}

func (n *Node) heldCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.digests)
}

// OwnedOf returns which of keys this node owns (is assigned).
func (n *Node) OwnedOf(keys []repokey.Key) map[repokey.Key]bool {
	if len(keys) == 0 {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	own := map[repokey.Key]bool{}
	for _, k := range keys {
		if _, ok := n.owned[string(k)]; ok {
			own[k] = true
		}
	}
	return own
}
