package fullnode

import (
	"sync/atomic"
	"testing"
)

// The goroutines the coordinator's messages start (a task's end, which
// may pull) are owned: stopping the work waits for those under way, so
// that none outlives the store, and none starts after it stopped.
func TestWorkIsWaitedForAndNoneStartsOnceStopped(t *testing.T) {
	var w work
	release := make(chan struct{})
	var finished atomic.Bool
	if !w.Go(func() { <-release; finished.Store(true) }) {
		t.Fatal("work refused before it stopped")
	}
	stopped := make(chan struct{})
	go func() { w.stop(); close(stopped) }()
	close(release)
	<-stopped
	if !finished.Load() {
		t.Fatal("stop returned before the work under way finished")
	}
	if w.Go(func() { t.Error("work started after stop") }) {
		t.Fatal("work accepted after stop")
	}
}
