package api

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// parked are the states of a goroutine that waits for something to happen
// to it: a channel (the clock's timers, a task's end, a request), or the
// network.
var parked = map[string]bool{"select": true, "select (no cases)": true, "chan receive": true, "chan send": true, "IO wait": true}

// busyGoroutines returns the stacks of the goroutines, other than the
// caller's, that run code of this package and are not parked.
func busyGoroutines() []string {
	own := make([]byte, 64)
	own = own[:runtime.Stack(own, false)]
	self, _, _ := strings.Cut(string(own), " [")
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var busy []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		// "goroutine 7 [select, 2 minutes]:"
		id, state, _ := strings.Cut(g, " [")
		if id == self {
			continue
		}
		state, _, _ = strings.Cut(state, "]")
		state, _, _ = strings.Cut(state, ",")
		if parked[state] {
			continue
		}
		for _, line := range strings.Split(g, "\n") {
			file, _, _ := strings.Cut(strings.TrimSpace(line), ":")
			if strings.Contains(file, "/internal/api/") {
				busy = append(busy, g)
				break
			}
		}
	}
	return busy
}

// settle waits until every goroutine of the server is parked: what it does
// next waits for the test (the clock, a task's end, a request). It is the
// event that a test waits for before it asserts that something did not
// happen; the deadline only bounds a failure.
func settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		busy := busyGoroutines()
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's goroutines are still busy:\n%s", strings.Join(busy, "\n\n"))
		}
		time.Sleep(time.Millisecond)
	}
}
