package node

import (
	"time"

	"github.com/gitfleet/gitfleet/internal/console"
)

// The console's figures that the counters keep as states change (see
// counters.go): the repositories by the minute of their verified_at (when
// the full node last saw the upstream's refs equal to what it serves:
// freshness.go), with an ordered index of each minute's keys, and by the
// public class of their last error. The staleness distribution then costs
// O(minutes with a verification), a few thousand over a day, and a listing
// of the stalest a walk from the oldest minute that stops at its page.

// neverVerified is the minute of a repository never verified; it sorts
// before every other.
const neverVerified = -1

// checkMinute is the minute of a time in ms since the epoch (0: never).
func checkMinute(ms int64) int64 {
	if ms <= 0 {
		return neverVerified
	}
	return ms / int64(time.Minute/time.Millisecond)
}

// consoleCounts are the console's counters; guarded by fullNode.mu.
type consoleCounts struct {
	minutes  map[int64]int          // repositories by minute of verified_at
	byMinute map[int64]*sortedIndex // their keys
	errors   map[string]int         // repositories by class of last error
}

func newConsoleCounts() *consoleCounts {
	return &consoleCounts{minutes: map[int64]int{}, byMinute: map[int64]*sortedIndex{}, errors: map[string]int{}}
}

// set follows a change of key's class from old (had: it was listed) to cl
// (listed: it still is).
func (c *consoleCounts) set(key string, old repoClass, had bool, cl repoClass, listed bool) {
	moved := !had || !listed || old.verified != cl.verified
	if had {
		if old.errClass != "" {
			if c.errors[old.errClass]--; c.errors[old.errClass] == 0 {
				delete(c.errors, old.errClass)
			}
		}
		if moved {
			if c.minutes[old.verified]--; c.minutes[old.verified] == 0 {
				delete(c.minutes, old.verified)
				delete(c.byMinute, old.verified)
			} else {
				c.byMinute[old.verified].remove(key)
			}
		}
	}
	if !listed {
		return
	}
	if cl.errClass != "" {
		c.errors[cl.errClass]++
	}
	if moved {
		c.minutes[cl.verified]++
		x := c.byMinute[cl.verified]
		if x == nil {
			x = &sortedIndex{}
			c.byMinute[cl.verified] = x
		}
		x.add(key)
		if mergeDue(x) {
			c.minuteKeys(cl.verified, nil)
		}
	}
}

// minuteKeys returns the keys last checked in minute m, in order; classes
// rebuilds the index if its bookkeeping went wrong.
func (c *consoleCounts) minuteKeys(m int64, classes *classTable) []string {
	x := c.byMinute[m]
	if x == nil {
		return nil
	}
	return x.ordered(c.minutes[m], func(keys []string) []string {
		for k, cl := range classes.all() {
			if cl.verified == m {
				keys = append(keys, k)
			}
		}
		return keys
	})
}

// staleness is the distribution of the time since verified_at at now,
// in the buckets of console.StaleBuckets, then the never checked.
func (c *consoleCounts) staleness(now time.Time) []int {
	out := make([]int, len(console.StaleBuckets)+2)
	nowMs := now.UnixMilli()
	for m, n := range c.minutes {
		if m == neverVerified {
			out[len(out)-1] += n
			continue
		}
		age := time.Duration(nowMs-m*int64(time.Minute/time.Millisecond)) * time.Millisecond
		i := 0
		for i < len(console.StaleBuckets) && age > console.StaleBuckets[i] {
			i++
		}
		out[i] += n
	}
	return out
}

// errorClasses returns a copy of the counts by error class.
func (c *consoleCounts) errorClasses() map[string]int {
	out := make(map[string]int, len(c.errors))
	for k, n := range c.errors {
		out[k] = n
	}
	return out
}
