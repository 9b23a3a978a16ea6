package e2e

import (
	"slices"
	"testing"
)

// admitted names the tickets of tks whose tests may run now.
func admitted(tks ...*ticket) []string {
	var out []string
	for _, tk := range tks {
		select {
		case <-tk.admitted:
			out = append(out, tk.name)
		default:
		}
	}
	return out
}

func TestSchedulerAdmitsNothingUntilTheRunHasComeThenTheHeaviestFirst(t *testing.T) {
	s := newScheduler(4, 64)
	a := s.enqueue("light-a", 1)
	b := s.enqueue("heavy-b", 2)
	c := s.enqueue("light-c", 1)
	d := s.enqueue("soak-d", 3)
	for _, tk := range []*ticket{a, b, c} {
		s.start(tk)
	}
	if got := admitted(a, b, c, d); len(got) != 0 {
		t.Fatalf("admitted %v before every test of the run came to start", got)
	}
	s.start(d)
	// The soak first, and the first light ticket in what is left: the heavy
	// one does not fit beside the soak.
	if got, want := admitted(a, b, c, d), []string{"light-a", "soak-d"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
	s.done(a)
	if got, want := admitted(b, c), []string{"light-c"}; !slices.Equal(got, want) {
		t.Fatalf("after a light test: admitted %v, want %v (a light test passes a heavy one that does not fit)", got, want)
	}
	s.done(d)
	if got, want := admitted(b), []string{"heavy-b"}; !slices.Equal(got, want) {
		t.Fatalf("after the soak: admitted %v, want %v", got, want)
	}
}

// With go test -parallel 2, two tests come to start at a time: those are
// the run's first, and a heavier ticket whose test has no slot yet holds
// no weight, which would keep the two waiting for it for ever.
func TestSchedulerAdmitsOnlyTestsThatGoTestLetThrough(t *testing.T) {
	s := newScheduler(4, 2)
	a := s.enqueue("light-a", 1)
	b := s.enqueue("soak-b", 3)
	c := s.enqueue("heavy-c", 2)
	s.start(a)
	if got := admitted(a, b, c); len(got) != 0 {
		t.Fatalf("admitted %v with one of two slots come", got)
	}
	s.start(c)
	if got, want := admitted(a, b, c), []string{"light-a", "heavy-c"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
	s.done(a)
	s.start(b) // a's slot let b through
	if got := admitted(b); len(got) != 0 {
		t.Fatalf("admitted %v beside a heavy test", got)
	}
	s.done(c)
	if got, want := admitted(b), []string{"soak-b"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}

func TestSchedulerTakesBackATicketThatNeverRanAndGathersTheNextRunAnew(t *testing.T) {
	s := newScheduler(2, 64)
	a := s.enqueue("a", 2)
	b := s.enqueue("b", 2)
	s.done(b) // b's test stopped before it came to start: it holds nothing
	s.done(b)
	s.start(a)
	if got, want := admitted(a), []string{"a"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
	s.done(a)
	if s.used != 0 || len(s.queue) != 0 {
		t.Fatalf("after every test: %d used, %d queued", s.used, len(s.queue))
	}
	// The next run (go test -count 2) is gathered again before it starts.
	c := s.enqueue("c", 1)
	d := s.enqueue("d", 5) // more than the capacity: the whole of it
	s.start(c)
	if got := admitted(c, d); len(got) != 0 {
		t.Fatalf("admitted %v before the next run came", got)
	}
	s.start(d)
	if got, want := admitted(c, d), []string{"d"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
	s.done(d)
	if got, want := admitted(c), []string{"c"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}
