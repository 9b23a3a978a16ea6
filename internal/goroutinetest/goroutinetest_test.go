package goroutinetest_test

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/goroutinetest"
)

func TestOthersFindsAParkedGoroutineAndNotTheCaller(t *testing.T) {
	block := make(chan struct{})
	started := make(chan struct{})
	go func() {
		close(started)
		<-block
	}()
	<-started
	defer close(block)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting, self int
		for _, g := range goroutinetest.Others() {
			if g.State == "chan receive" && g.Parked() {
				waiting++
			}
			if g.Runs("internal/goroutinetest") {
				// Only test frames are in this package: no goroutine runs
				// its non-test code.
				self++
			}
		}
		if self != 0 {
			t.Fatalf("%d goroutines run the package's own code; Runs should skip test files", self)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the goroutine waiting on a channel was not found parked")
		}
		time.Sleep(time.Millisecond)
	}
}
