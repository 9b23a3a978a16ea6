package repoview

// StaleCounter counts the repositories whose last check is older than a
// cutoff, for the stale-repositories alert, without a walk of the
// repositories: the last checks are counted in buckets of a minute, and the
// count below the cutoff is kept as repositories change and as the cutoff
// moves (forward, as time does: O(minutes moved) per evaluation, and O(1)
// per change of a repository). Repositories never checked are not counted
// (they are pending). The figure is exact to the minute. The zero value is
// ready. (The full node counts its verified_at as the last check.)
type StaleCounter struct {
	buckets map[int64]int // repositories by the unix minute of their last check
	cursor  int64         // the buckets below it are counted in stale
	stale   int
	started bool
}

const msPerMinute = 60_000

func minuteOf(ms int64) int64 {
	if ms < 0 {
		return (ms - msPerMinute + 1) / msPerMinute
	}
	return ms / msPerMinute
}

// Move records that a repository's last check went from oldMs to newMs
// (unix ms; 0: none, as for a repository that came or left).
func (c *StaleCounter) Move(oldMs, newMs int64) {
	if oldMs == newMs {
		return
	}
	if c.buckets == nil {
		c.buckets = map[int64]int{}
	}
	if oldMs != 0 {
		b := minuteOf(oldMs)
		if c.buckets[b]--; c.buckets[b] <= 0 {
			delete(c.buckets, b)
		}
		if c.started && b < c.cursor {
			c.stale--
		}
	}
	if newMs != 0 {
		b := minuteOf(newMs)
		c.buckets[b]++
		if c.started && b < c.cursor {
			c.stale++
		}
	}
}

// Count returns how many repositories were last checked before the
// minute of cutoffMs (unix ms).
func (c *StaleCounter) Count(cutoffMs int64) int {
	target := minuteOf(cutoffMs)
	if !c.started {
		c.started, c.cursor, c.stale = true, target, 0
		for b, n := range c.buckets {
			if b < target {
				c.stale += n
			}
		}
		return c.stale
	}
	lo, hi, sign := c.cursor, target, 1
	if target < c.cursor {
		lo, hi, sign = target, c.cursor, -1
	}
	if hi-lo <= int64(len(c.buckets)) {
		for b := lo; b < hi; b++ {
			c.stale += sign * c.buckets[b]
		}
	} else { // a long jump (a first evaluation after a long pause): fewer buckets than minutes
		for b, n := range c.buckets {
			if b >= lo && b < hi {
				c.stale += sign * n
			}
		}
	}
	c.cursor = target
	return c.stale
}
