package e2e

import (
	"cmp"
	"slices"
	"sync"
	"testing"
	"time"
)

// The package's tests run side by side (t.Parallel), as many at a time as
// the machine has room for: each says what it costs by a weight, and
// machine admits tests while the weights of those running leave room.
//
// A fleet of four processes checking 30 repositories every few seconds keeps
// about half a core busy; the soak's seven processes, its listings and its
// clones, more than a core. Two cores hold the soak beside light tests, or
// two fleets, without stretching the waits the tests bound.
const (
	// capacity is the weight that may run at once.
	capacity = 4
	// lightTest is a test of one process, or of a small fleet.
	lightTest = 1
	// fleetTest is a test of a fleet of many repositories or processes.
	fleetTest = 2
	// soakTest is TestSoak, beside which only light tests run.
	soakTest = 3
)

// machine is the one scheduler of the package's parallel tests; TestMain
// makes it, knowing how many tests go test lets run at once.
var machine *scheduler

// parallel runs t beside the package's other tests once the machine has
// room for weight, and gives the room back when t ends. Call it first in a
// test (after a skip): the tests are queued in the order go test starts
// them, and start once every test of the run is queued, heaviest first.
func parallel(t *testing.T, weight int) {
	t.Helper()
	tk := machine.enqueue(t.Name(), weight)
	t.Cleanup(func() { machine.done(tk) }) // also when t stops before it ran
	// Parallel returns once go test has started every top-level test of the
	// run (each has queued its ticket) and has a slot for t.
	t.Parallel()
	began := time.Now()
	<-machine.start(tk)
	t.Logf("the machine admitted it after %v (weight %d of %d)", time.Since(began).Round(time.Second), tk.weight, machine.capacity)
}

// scheduler admits weighted tickets while their weights fit its capacity,
// heaviest first (the longest tests then start at once, and light ones fill
// what is left at the end), in the order queued among equals. It admits
// only tickets whose tests wait to run (go test lets slots of them through
// at once; one admitted and not let through would hold its weight while
// the tests holding go test's slots wait for it), and none until every
// ticket that can come has come.
type scheduler struct {
	mu       sync.Mutex
	capacity int
	slots    int // tests go test runs at once (-parallel)
	used     int
	open     bool      // the run's tickets have come to start: admit
	queue    []*ticket // not admitted yet, in the order they are admitted
	seq      int
}

type ticket struct {
	name     string
	weight   int
	seq      int
	admitted chan struct{} // closed when it may run
	waiting  bool          // its test waits in start
	running  bool
	finished bool
}

func newScheduler(capacity, slots int) *scheduler {
	return &scheduler{capacity: capacity, slots: max(slots, 1)}
}

// enqueue queues a ticket of weight (at most the capacity).
func (s *scheduler) enqueue(name string, weight int) *ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	tk := &ticket{name: name, weight: min(max(weight, 1), s.capacity), seq: s.seq, admitted: make(chan struct{})}
	i, _ := slices.BinarySearchFunc(s.queue, tk, byWeight)
	s.queue = slices.Insert(s.queue, i, tk)
	return tk
}

// byWeight orders tickets heaviest first, then in the order queued.
func byWeight(a, b *ticket) int {
	if c := cmp.Compare(b.weight, a.weight); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// start says that tk's test waits to run, and returns a channel closed
// once it is admitted. The first tickets of a run are admitted once as
// many wait as go test lets through: all of them, or slots.
func (s *scheduler) start(tk *ticket) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk.waiting = true
	if !s.open {
		waiting := 0
		for _, q := range s.queue {
			if q.waiting {
				waiting++
			}
		}
		s.open = waiting >= min(len(s.queue), s.slots)
	}
	s.admit()
	return tk.admitted
}

// done gives tk's weight back, or takes it out of the queue if it never
// ran.
func (s *scheduler) done(tk *ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tk.finished {
		return
	}
	tk.finished = true
	if tk.running {
		s.used -= tk.weight
	} else {
		s.queue = slices.DeleteFunc(s.queue, func(q *ticket) bool { return q == tk })
	}
	if s.used == 0 && len(s.queue) == 0 {
		s.open = false // the run is over; the next (-count) gathers anew
	}
	s.admit()
}

// admit runs the waiting tickets that fit, in the queue's order: a light
// ticket may pass a heavy one that does not fit yet.
func (s *scheduler) admit() {
	if !s.open {
		return
	}
	s.queue = slices.DeleteFunc(s.queue, func(tk *ticket) bool {
		if !tk.waiting || s.used+tk.weight > s.capacity {
			return false
		}
		s.used += tk.weight
		tk.running = true
		close(tk.admitted)
		return true
	})
}
