package node

import (
	"time"

	"github.com/gitfleet/gitfleet/internal/console"
)

// The console's figures that the counters keep as states change (see
// counters.go): the repositories by the minute of their last check, with
// an ordered index of each minute's keys, and by the public class of their
// last error. The staleness distribution then costs O(minutes with a
// check), a few thousand over a day, and a listing of the stalest a walk
// from the oldest minute that stops at its page.

// neverChecked is the minute of a repository never checked; it sorts
// before every other.
const neverChecked = -1

// checkMinute is the minute of a last check (in ms since the epoch).
func checkMinute(ms int64) int64 {
	if ms <= 0 {
		return neverChecked
	}
	return ms / int64(time.Minute/time.Millisecond)
}

// consoleCounts are the console's counters; guarded by fullNode.mu.
type consoleCounts struct {
	minutes  map[int64]int          // repositories by minute of last check
	byMinute map[int64]*sortedIndex // their keys
	errors   map[string]int         // repositories by class of last error
}

func newConsoleCounts() *consoleCounts {
	return &consoleCounts{minutes: map[int64]int{}, byMinute: map[int64]*sortedIndex{}, errors: map[string]int{}}
}

// set follows a change of key's class from old (had: it was listed) to cl
// (listed: it still is).
func (c *consoleCounts) set(key string, old repoClass, had bool, cl repoClass, listed bool) {
	moved := !had || !listed || old.checked != cl.checked
	if had {
		if old.errClass != "" {
			if c.errors[old.errClass]--; c.errors[old.errClass] == 0 {
				delete(c.errors, old.errClass)
			}
		}
		if moved {
			if c.minutes[old.checked]--; c.minutes[old.checked] == 0 {
				delete(c.minutes, old.checked)
				delete(c.byMinute, old.checked)
			} else {
				c.byMinute[old.checked].remove(key)
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
		c.minutes[cl.checked]++
		x := c.byMinute[cl.checked]
		if x == nil {
			x = &sortedIndex{}
			c.byMinute[cl.checked] = x
		}
		x.add(key)
		if mergeDue(x) {
			c.minuteKeys(cl.checked, nil)
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
			if cl.checked == m {
				keys = append(keys, k)
			}
		}
		return keys
	})
}

// staleness is the distribution of the time since the last check at now,
// in the buckets of console.StaleBuckets, then the never checked.
func (c *consoleCounts) staleness(now time.Time) []int {
	out := make([]int, len(console.StaleBuckets)+2)
	nowMs := now.UnixMilli()
	for m, n := range c.minutes {
		if m == neverChecked {
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
