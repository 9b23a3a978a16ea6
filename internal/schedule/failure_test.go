package schedule

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// failAndWait reports the running check of key as failed with class c
// and returns how long until the scheduler would start it again.
func failAndWait(t *testing.T, s *Scheduler, key string, c FailureClass) time.Duration {
	t.Helper()
	s.Done(repokey.Key(key), Outcome{Class: c})
	r := s.repos[repokey.Key(key)]
	if r.queue != waitingQueue {
		t.Fatalf("%s after a %v failure is in queue %d, want waiting", key, c, r.queue)
	}
	return r.notBefore.Sub(s.clk.Now())
}

// startNow makes key due and starts it.
func startNow(t *testing.T, s *Scheduler, key string) {
	t.Helper()
	s.Urgent(repokey.Key(key))
	if got, ok, _ := s.Next(); !ok || got != repokey.Key(key) {
		t.Fatalf("Next() = %q, %v; want %q", got, ok, key)
	}
}

func TestFailureBackoff(t *testing.T) {
	tests := []struct {
		class     FailureClass
		base, cap time.Duration
	}{
		{Transient, transientBase, 24 * time.Hour},
		{NotFound, transientBase, 24 * time.Hour}, // until GoneAfter in a row
		{Auth, longBase, longCap},
		{TLS, longBase, longCap},
	}
	for _, tt := range tests {
		t.Run(tt.class.String(), func(t *testing.T) {
			s, _ := newTest(t, Config{Policy: PolicyFixed})
			s.Add("a", "h", cloned(t0))
			for n := 1; n < GoneAfter; n++ {
				startNow(t, s, "a")
				wait := failAndWait(t, s, "a", tt.class)
				d := min(tt.base<<(n-1), tt.cap)
				if wait < d/2 || wait > d {
					t.Errorf("failure %d: retry in %v, want within [%v, %v]", n, wait, d/2, d)
				}
			}
		})
	}
}

func TestBackoffJitterIsSeeded(t *testing.T) {
	waits := func(seed uint64) []time.Duration {
		s, _ := newTest(t, Config{Seed: seed})
		s.Add("a", "h", cloned(t0))
		var out []time.Duration
		for range 6 {
			startNow(t, s, "a")
			out = append(out, failAndWait(t, s, "a", Transient))
		}
		return out
	}
	a, b, c := waits(1), waits(1), waits(2)
	same := func(x, y []time.Duration) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Errorf("same seed, different backoffs: %v and %v", a, b)
	}
	if same(a, c) {
		t.Errorf("different seeds, same backoffs: %v", a)
	}
}

func TestSuccessResetsFailureCounters(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", cloned(t0))
	for range 5 {
		startNow(t, s, "a")
		failAndWait(t, s, "a", Transient)
	}
	startNow(t, s, "a")
	s.Done("a", success)
	startNow(t, s, "a")
	if wait := failAndWait(t, s, "a", Transient); wait > transientBase {
		t.Errorf("first failure after a success: retry in %v, want at most %v", wait, transientBase)
	}
}

func TestNotFoundInARowParksTheRepositoryAsGone(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", cloned(t0))
	var wait time.Duration
	for range GoneAfter {
		startNow(t, s, "a")
		wait = failAndWait(t, s, "a", NotFound)
	}
	if wait != GoneRecheck {
		t.Errorf("gone repository rechecked in %v, want %v", wait, GoneRecheck)
	}
	if n := s.Stats().Gone; n != 1 {
		t.Errorf("Stats().Gone = %d, want 1", n)
	}
	startNow(t, s, "a")
	if wait := failAndWait(t, s, "a", NotFound); wait != GoneRecheck {
		t.Errorf("gone repository: next recheck in %v, want %v", wait, GoneRecheck)
	}
	startNow(t, s, "a")
	s.Done("a", success)
	if n := s.Stats().Gone; n != 0 {
		t.Errorf("Stats().Gone = %d after the repository came back, want 0", n)
	}
}

func TestNotFoundStreakIsBrokenByOtherFailures(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", cloned(t0))
	for _, c := range []FailureClass{NotFound, NotFound, NotFound, NotFound, Transient, NotFound} {
		startNow(t, s, "a")
		failAndWait(t, s, "a", c)
	}
	if n := s.Stats().Gone; n != 0 {
		t.Errorf("Stats().Gone = %d, want 0: the NotFound answers were not %d in a row", n, GoneAfter)
	}
}

func TestDiskFailureStopsBackgroundChecksUntilHealthy(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed})
	s.Add("a", "h", cloned(t0.Add(-48*time.Hour)))
	s.Add("b", "h", cloned(t0.Add(-48*time.Hour)))
	s.Add("c", "h", cloned(t0))
	key, _, _ := s.Next()
	s.Done(key, Outcome{Class: Disk})
	if s.Healthy() {
		t.Fatal("Healthy() after a Disk failure")
	}
	clk.Advance(time.Hour)
	if key, ok, wait := s.Next(); ok || wait != 0 {
		t.Fatalf("Next() = %q, %v, %v while unhealthy; want no background check and wait 0", key, ok, wait)
	}
	s.Urgent("c")
	if key, ok, _ := s.Next(); !ok || key != "c" {
		t.Fatalf("Next() = %q, %v; want the urgent check even when unhealthy", key, ok)
	}
	s.Done("c", success)
	if !s.Healthy() {
		t.Fatal("a successful check did not make the node healthy again")
	}
	if _, ok, _ := s.Next(); !ok {
		t.Error("background checks did not resume after a success")
	}
}

func TestResetHealthResumesBackgroundChecks(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed})
	s.Add("a", "h", cloned(t0.Add(-48*time.Hour)))
	key, _, _ := s.Next()
	s.Done(key, Outcome{Class: Disk})
	clk.Advance(time.Hour)
	if _, ok, _ := s.Next(); ok {
		t.Fatal("a background check started while unhealthy")
	}
	s.ResetHealth()
	if got, ok, _ := s.Next(); !ok || got != key {
		t.Errorf("Next() = %q, %v after ResetHealth; want %q retried", got, ok, key)
	}
}

func TestFailedCloneIsRetriedInTheBackground(t *testing.T) {
	s, clk := newTest(t, Config{})
	s.Add("a", "h", RepoState{})
	key, _, _ := s.Next()
	s.Done(key, Outcome{Class: Transient})
	if _, ok, wait := s.Next(); ok || wait <= 0 || wait > transientBase {
		t.Fatalf("Next() = %v, %v; want a retry within %v", ok, wait, transientBase)
	}
	clk.Advance(transientBase)
	if got, ok, _ := s.Next(); !ok || got != "a" {
		t.Errorf("Next() = %q, %v; want the clone retried", got, ok)
	}
}

// An upstream that answers 451 (a takedown) is not retried as a network
// error: the repository is parked as gone at once, rechecked once a day,
// and back when a check succeeds.
func TestLegalUnavailabilityParksTheRepositoryAsGoneAtOnce(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", cloned(t0))
	startNow(t, s, "a")
	if wait := failAndWait(t, s, "a", Legal); wait != GoneRecheck {
		t.Errorf("after a 451 the repository is rechecked in %v, want %v", wait, GoneRecheck)
	}
	if n := s.Stats().Gone; n != 1 {
		t.Errorf("Stats().Gone = %d, want 1", n)
	}
	startNow(t, s, "a")
	if wait := failAndWait(t, s, "a", Legal); wait != GoneRecheck {
		t.Errorf("a second 451: recheck in %v, want %v", wait, GoneRecheck)
	}
	if n := s.Stats().Gone; n != 1 {
		t.Errorf("Stats().Gone = %d after a second 451, want 1", n)
	}
	startNow(t, s, "a")
	s.Done("a", success)
	if n := s.Stats().Gone; n != 0 {
		t.Errorf("Stats().Gone = %d after the repository came back, want 0", n)
	}
}
