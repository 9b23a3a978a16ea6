package repoview

import (
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// The console's figures that the counters keep as states change (see
// counters.go): the repositories by the minute of their verified_at (when
// the full node last saw the upstream's refs equal to what it serves:
// package fullnode), with an ordered index of each minute's keys, and by the
// public class of their last error. The staleness distribution then costs
// O(minutes with a verification), a few thousand over a day, and a listing
// of the stalest a walk from the oldest minute that stops at its page.

// neverVerified is the minute of a repository never verified; it sorts
// before every other.
const neverVerified = -1

// VerifiedMinute is the minute of a verified_at in ms since the epoch, as
// a Class keeps it (0: never).
func VerifiedMinute(ms int64) int64 {
	if ms <= 0 {
		return neverVerified
	}
	return ms / int64(time.Minute/time.Millisecond)
}

// consoleCounts are the console's counters, kept by Counters.
type consoleCounts struct {
	minutes  map[int64]int           // repositories by minute of verified_at
	byMinute map[int64]*SortedIndex  // their keys
	errors   map[repostate.Class]int // repositories by class of last error
}

func newConsoleCounts() *consoleCounts {
	return &consoleCounts{minutes: map[int64]int{}, byMinute: map[int64]*SortedIndex{}, errors: map[repostate.Class]int{}}
}

// set follows a change of key's class from old (had: it was listed) to cl
// (listed: it still is).
func (c *consoleCounts) set(key repokey.Key, old Class, had bool, cl Class, listed bool) {
	moved := !had || !listed || old.Verified != cl.Verified
	if had {
		if old.ErrClass != repostate.NoClass {
			if c.errors[old.ErrClass]--; c.errors[old.ErrClass] == 0 {
				delete(c.errors, old.ErrClass)
			}
		}
		if moved {
			if c.minutes[old.Verified]--; c.minutes[old.Verified] == 0 {
				delete(c.minutes, old.Verified)
				delete(c.byMinute, old.Verified)
			} else {
				c.byMinute[old.Verified].Remove(key)
			}
		}
	}
	if !listed {
		return
	}
	if cl.ErrClass != repostate.NoClass {
		c.errors[cl.ErrClass]++
	}
	if moved {
		c.minutes[cl.Verified]++
		x := c.byMinute[cl.Verified]
		if x == nil {
			x = &SortedIndex{}
			c.byMinute[cl.Verified] = x
		}
		x.Add(key)
		if mergeDue(x) {
			c.minuteKeys(cl.Verified, nil)
		}
	}
}

// minuteKeys returns the keys last checked in minute m, in order; classes
// rebuilds the index if its bookkeeping went wrong.
func (c *consoleCounts) minuteKeys(m int64, classes *classTable) []repokey.Key {
	x := c.byMinute[m]
	if x == nil {
		return nil
	}
	return x.ordered(c.minutes[m], func(keys []repokey.Key) []repokey.Key {
		for k, cl := range classes.all() {
			if cl.Verified == m {
				keys = append(keys, k)
			}
		}
		return keys
	})
}

// Staleness is the distribution of the time since verified_at at now, in
// buckets (each bucket holds the ages up to its bound; then those over the
// last bound), then the never checked: O(minutes with a verification).
func (c *Counters) Staleness(now time.Time, buckets []time.Duration) []int {
	out := make([]int, len(buckets)+2)
	nowMs := now.UnixMilli()
	for m, n := range c.console.minutes {
		if m == neverVerified {
			out[len(out)-1] += n
			continue
		}
		age := time.Duration(nowMs-m*int64(time.Minute/time.Millisecond)) * time.Millisecond
		i := 0
		for i < len(buckets) && age > buckets[i] {
			i++
		}
		out[i] += n
	}
	return out
}

// ErrorClasses returns the counts by public class of the last error, by
// the class's text.
func (c *Counters) ErrorClasses() map[string]int {
	out := make(map[string]int, len(c.console.errors))
	for cl, n := range c.console.errors {
		out[cl.String()] = n
	}
	return out
}

// Stalest calls yield for the keys whose verified_at is older than the
// minute before (VerifiedMinute), the never verified first, then from the
// oldest minute, in order within a minute; with never, only the never
// verified. It stops when yield returns false.
func (c *Counters) Stalest(before int64, never bool, yield func(key repokey.Key) bool) {
	cc := c.console
	var minutes []int64
	for m := range cc.minutes {
		if m == neverVerified || !never && m < before {
			minutes = append(minutes, m)
		}
	}
	slices.Sort(minutes)
	for _, m := range minutes {
		for _, k := range cc.minuteKeys(m, c.classes) {
			if !yield(k) {
				return
			}
		}
	}
}
