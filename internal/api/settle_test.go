package api

import (
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/goroutinetest"
)

// busyGoroutines returns the stacks of the goroutines, other than the
// caller's, that run code of this package and are not parked.
func busyGoroutines() []string {
	var busy []string
	for _, g := range goroutinetest.Others() {
		if !g.Parked() && g.Runs("internal/api") {
			busy = append(busy, g.Stack)
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
