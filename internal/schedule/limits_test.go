package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A repository over an operator's limit is not retried in a loop: it waits
// MaxInterval, unless it is asked for urgently (a webhook says the upstream
// changed).
func TestOverLimitWaitsMaxIntervalUnlessAskedFor(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed, MaxInterval: 24 * time.Hour})
	s.Add("big", "h", RepoState{})
	key, _, _ := s.Next()
	s.Done(key, Outcome{Class: OverLimit})
	for i := 0; i < 23; i++ {
		clk.Advance(time.Hour)
		if got, ok, _ := s.Next(); ok {
			t.Fatalf("%q checked again %d h after it was over a limit", got, i+1)
		}
	}
	clk.Advance(time.Hour)
	if got, ok, _ := s.Next(); !ok || got != "big" {
		t.Fatalf("Next() = %q, %v after MaxInterval; want it checked again", got, ok)
	}
	s.Done("big", Outcome{Class: OverLimit})
	s.Urgent("big")
	if got, ok, _ := s.Next(); !ok || got != "big" {
		t.Fatalf("Next() = %q, %v; an urgent check must not wait", got, ok)
	}
	if !s.Healthy() {
		t.Fatal("a limit made the node unhealthy")
	}
}

// A full disk must not make the same large repository download again every
// minute: once the node is healthy again, the others resume at once and
// the repository that hit the full disk backs off, longer each time.
func TestRepositoryThatFilledTheDiskBacksOff(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed, MaxInterval: 24 * time.Hour, MinInterval: time.Minute})
	s.Add("large", "h", RepoState{})
	s.Add("small", "h", cloned(t0.Add(-48*time.Hour)))
	s.Urgent("large")
	if key, ok, _ := s.Next(); !ok || key != "large" {
		t.Fatalf("Next() = %q, %v", key, ok)
	}
	var waits []time.Duration
	for round := 0; round < 4; round++ {
		s.Done("large", Outcome{Class: Disk})
		s.ResetHealth() // the node freed space
		waited := time.Duration(0)
		for {
			got, ok, wait := s.Next()
			if ok && got == "large" {
				break
			}
			if ok {
				s.Done(got, success)
				continue
			}
			if wait <= 0 || wait > time.Hour {
				wait = time.Minute
			}
			clk.Advance(wait)
			waited += wait
			if waited > 48*time.Hour {
				t.Fatalf("round %d: never retried", round)
			}
		}
		waits = append(waits, waited)
	}
	if waits[0] < 30*time.Minute {
		t.Fatalf("retried %v after filling the disk; want a long backoff", waits[0])
	}
	if waits[len(waits)-1] <= waits[0] {
		t.Fatalf("backoff did not grow: %v", waits)
	}
}

func TestHostConcurrencyCapsTheChecksOfOneHostAndLeavesOthers(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	s, err := New(Config{Concurrency: 10, HostConcurrency: 2}, clk)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		s.Add(repokey.Key(fmt.Sprintf("small.example/r%d", i)), "small.example", RepoState{})
		s.Add(repokey.Key(fmt.Sprintf("big.example/r%d", i)), "big.example", RepoState{})
	}
	running := map[string]int{}
	var keys []string
	for {
		key, ok, _ := s.Next()
		if !ok {
			break
		}
		keys = append(keys, string(key))
		running[strings.Split(string(key), "/")[0]]++
	}
	if running["small.example"] != 2 || running["big.example"] != 2 {
		t.Fatalf("running %v, want 2 a host", running)
	}
	s.Done(repokey.Key(keys[0]), Outcome{Changed: true})
	key, ok, _ := s.Next()
	if !ok || strings.Split(string(key), "/")[0] != strings.Split(keys[0], "/")[0] {
		t.Fatalf("after one of %s ended: %q %v, want another of that host", keys[0], key, ok)
	}
	if _, err := New(Config{HostConcurrency: -1}, clk); err == nil {
		t.Fatal("a negative host concurrency was accepted")
	}
}
