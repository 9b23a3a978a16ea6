package repoview

import (
	"math/rand/v2"
	"testing"
)

// TestStaleCounterMatchesACountOfEveryRepository moves repositories' last
// checks at random while the cutoff moves forward (and once back), and
// compares the counter with a count of every repository each time.
func TestStaleCounterMatchesACountOfEveryRepository(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 500
	var c StaleCounter
	last := make([]int64, n) // 0: never checked, or not in the view
	now := int64(1_700_000_000_000)
	brute := func(cutoff int64) int {
		k := 0
		for _, ms := range last {
			if ms != 0 && minuteOf(ms) < minuteOf(cutoff) {
				k++
			}
		}
		return k
	}
	for step := range 2000 {
		for range rng.IntN(20) {
			i := rng.IntN(n)
			next := now - rng.Int64N(3*24*3600*1000) // within three days
			switch rng.IntN(10) {
			case 0:
				next = 0 // removed
			case 1:
				next = now // checked just now
			}
			c.Move(last[i], next)
			last[i] = next
		}
		switch {
		case step == 1000:
			now -= 6 * 3600 * 1000 // the cutoff moves back (a changed setting, a clock set back)
		case step%100 == 0:
			now += 12 * 3600 * 1000 // a long pause
		default:
			now += rng.Int64N(60_000)
		}
		cutoff := now - 24*3600*1000
		if got, want := c.Count(cutoff), brute(cutoff); got != want {
			t.Fatalf("step %d: counted %d stale, want %d", step, got, want)
		}
	}
}
