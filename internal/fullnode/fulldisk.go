package fullnode

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// The full node's own disk. Above the high water (cfg.DiskHighWater of
// --disk-quota, or of the file system) it takes no new repositories: a
// first pull of a repository it does not hold is not started, nor a first
// clone from the upstream of one it owns (as a ring member, as in
// `gitfleet up`), and the key waits (no retry) until a measure of the disk
// finds it below the mark again. Updates of the repositories it holds go
// on with --full-disk-policy refuse-new (the default; the room above the
// mark is theirs); with refuse-all every pull and every own fetch waits.

// Full disk policies (--full-disk-policy).
const (
	FullDiskRefuseNew = "refuse-new"
	FullDiskRefuseAll = "refuse-all"
)

// fullDiskError is the error a repository that waits for room shows in the
// API; its public class is "disk full".
const fullDiskError = "disk full: the full node is above its disk high water; the pull waits until it has room"

// ValidFullDiskPolicy reports whether p is a known --full-disk-policy.
func ValidFullDiskPolicy(p string) error {
	switch p {
	case FullDiskRefuseNew, FullDiskRefuseAll:
		return nil
	}
	return fmt.Errorf("unknown full disk policy %q (refuse-new or refuse-all)", p)
}

// diskMark is the full node's disk against its high water: pure logic,
// fed with measures and the clock's time.
type diskMark struct {
	full        bool
	since       time.Time // when the mark was last crossed
	used, total uint64    // the last measure
}

// observe records a measure and reports whether it crossed the mark
// (either way). A disk of unknown size (total 0) is never full.
func (m *diskMark) observe(used, total uint64, highWater float64, now time.Time) bool {
	m.used, m.total = used, total
	full := total > 0 && float64(used) > highWater*float64(total)
	if full == m.full {
		return false
	}
	m.full, m.since = full, now
	return true
}

// admitPull tells whether a pull may start: held tells whether the node
// holds a mirror of the repository already.
func admitPull(full, held bool, policy string) bool {
	if !full {
		return true
	}
	return held && policy != FullDiskRefuseAll
}

// measureDisk measures the disk (disk: every 10 s with a quota), logs once
// when the mark is crossed each way and, below the mark again, puts the
// keys that waited for room back in the queue.
func (f *Node) measureDisk() {
	used, total := f.n.Disk()
	f.mu.Lock()
	crossed := f.mark.observe(used, total, f.cfg.DiskHighWater, f.clk.Now())
	full := f.mark.full
	// Keys wait only while the mark is up, or for one measure when an own
	// clone found the room reserved by clones under way.
	released := f.plan.Disk(full)
	f.mu.Unlock()
	own := f.n.OwnedOf(released)
	f.mu.Lock()
	for _, k := range released {
		if !own[k] {
			f.plan.Queue(k)
		}
	}
	f.mu.Unlock()
	switch {
	case crossed && full:
		f.log.Warn("full node disk above its high water; taking no new repositories", "used_bytes", used,
			"total_bytes", total, "high_water", f.cfg.DiskHighWater, "policy", f.cfg.FullDiskPolicy)
	case crossed:
		f.log.Info("full node disk below its high water; taking repositories again", "used_bytes", used,
			"total_bytes", total, "released", len(released))
	}
	if len(released) > 0 {
		f.reclass(released...)
		f.kick()
		// Its own fetches, out of the scheduler while they waited.
		f.n.Reschedule(slices.Collect(maps.Keys(own))...)
	}
}

// gate decides whether a pull or an own fetch of a repository may start
// now (held: the node holds a mirror of it), by the mark and the policy;
// a first one also reserves its room (reserveClone), so that parallel
// clones cannot all slip under the mark. The returned function ends the
// reservation.
func (f *Node) gate(held bool) (func(), bool) {
	f.mu.Lock()
	full := f.mark.full
	f.mu.Unlock()
	if !admitPull(full, held, f.cfg.FullDiskPolicy) {
		return nil, false
	}
	if held {
		return func() {}, true
	}
	return f.n.ReserveClone()
}

// admit decides whether the pull of key may start now. A first pull also
// reserves its room (reserveClone), so that parallel clones cannot all slip
// under the mark; the returned function ends the reservation. A key refused
// while the disk is above the mark waits for room, without retry.
func (f *Node) admit(key repokey.Key) (func(), bool) {
	_, held := f.n.Digest(key)
	if done, ok := f.gate(held); ok {
		return done, true
	}
	// Refused while clones under way are counted (their size is not
	// known yet), it is tried again shortly (Plan.Refused).
	f.mu.Lock()
	waits := f.plan.Refused(key, f.clk.Now())
	f.mu.Unlock()
	if waits {
		f.log.Debug("pull waits for disk room", "key", key)
		f.reclass(key)
	}
	return nil, false
}

// admitNow decides whether an on-demand pull of key may run now, as admit
// does, but answers a refusal with an error instead of queueing the key.
func (f *Node) admitNow(key repokey.Key) (func(), error) {
	_, held := f.n.Digest(key)
	if done, ok := f.gate(held); ok {
		return done, nil
	}
	return nil, errors.New(fullDiskError)
}

// waitOwn makes key, owned here, whose fetch gate refused, wait for disk
// room out of the scheduler: a measure of the disk below the mark puts it
// back (measureDisk).
func (f *Node) waitOwn(key repokey.Key) {
	f.mu.Lock()
	f.plan.WaitDisk(key)
	f.mu.Unlock()
	f.log.Debug("own fetch waits for disk room", "key", key)
	f.reclass(key)
}

// diskWaiting tells whether key waits for disk room.
func (f *Node) diskWaiting(key repokey.Key) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.plan.DiskWaiting(key)
}

// diskFigures are the full node's disk metrics: the last measure, whether
// it is above the mark, and how many repositories wait for room.
func (f *Node) diskFigures() (used, total uint64, full bool, waiting int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mark.used, f.mark.total, f.mark.full, f.plan.DiskWaitCount()
}
