package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestRestoreResumesTheScheduleWithoutABurst(t *testing.T) {
	for _, policy := range []string{PolicyAdaptive, PolicyFixed, PolicyCompass, PolicySourcegraph} {
		t.Run(policy, func(t *testing.T) {
			cfg := Config{Policy: policy, Budget: 100}
			state := func(i int) RepoState {
				return RepoState{LastChange: t0.Add(-time.Duration(i+1) * time.Hour), Cloned: true}
			}
			s, clk := newTest(t, cfg)
			for i := range 100 {
				s.Add(repokey.Key(fmt.Sprint(i)), "h", state(i))
			}
			drive(t, s, clk, t0.Add(36*time.Hour), always(success))
			saved := s.Snapshot()

			// The node restarts 10 minutes later and adds its
			// repositories again, then restores their schedule.
			clk.Advance(10 * time.Minute)
			restarted, err := New(cfg, clk)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				restarted.Add(repokey.Key(fmt.Sprint(i)), "h", state(i))
			}
			if n := restarted.Restore(saved); n != 100 {
				t.Fatalf("Restore applied %d entries, want 100", n)
			}
			got := restarted.Snapshot()
			for i := range saved {
				if !got[i].Due.Equal(saved[i].Due) || got[i].Rank != saved[i].Rank {
					t.Errorf("%s: restored due %v rank %v, want %v %v", saved[i].Key, got[i].Due, got[i].Rank, saved[i].Due, saved[i].Rank)
				}
			}
			due := 0
			for _, p := range saved {
				if !p.Due.After(clk.Now()) {
					due++
				}
			}
			started := 0
			for {
				key, ok, _ := restarted.Next()
				if !ok {
					break
				}
				started++
				restarted.Done(key, success)
			}
			if started > due {
				t.Errorf("%d checks at restart, want at most the %d that were due", started, due)
			}
			// Compass has no due times (every repository is ready, the
			// budget paces them); the others must be spread.
			if policy != PolicyCompass && due > 25 {
				t.Errorf("%d of 100 repositories due at restart: the schedule was not spread", due)
			}
			if started > 10 {
				t.Errorf("%d checks at once at restart, want at most the budget's burst (10)", started)
			}
		})
	}
}

func TestRestoreKeepsFailuresAndTheUrgentLane(t *testing.T) {
	s, clk := newTest(t, Config{})
	s.Add("gone", "h", cloned(t0))
	s.Add("hook", "h", cloned(t0))
	for range GoneAfter {
		startNow(t, s, "gone")
		s.Done("gone", Outcome{Class: NotFound})
	}
	s.Urgent("hook")
	saved := s.Snapshot()

	restarted, _ := New(Config{}, clk)
	restarted.Add("gone", "h", cloned(t0))
	restarted.Add("hook", "h", cloned(t0))
	restarted.Add("new", "h", cloned(t0))
	if n := restarted.Restore(append(saved, PersistedRepo{Key: "dropped"})); n != 2 {
		t.Errorf("Restore applied %d entries, want 2 (dropped was not added)", n)
	}
	if st := restarted.Stats(); st.Gone != 1 || st.Urgent != 1 {
		t.Errorf("Stats() = %+v, want 1 gone and 1 urgent", st)
	}
	if key, _, _ := restarted.Next(); key != "hook" {
		t.Errorf("Next() = %q, want the urgent hook first", key)
	}
}

func TestAddSpreadsFirstChecksWithoutRestore(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed, Budget: 100})
	for i := range 100 {
		s.Add(repokey.Key(fmt.Sprint(i)), "h", RepoState{Cloned: true})
	}
	// 100 repositories at 100 checks an hour: one an hour each, the
	// first ones spread over that hour.
	starts := drive(t, s, clk, t0.Add(time.Hour), always(success))
	perQuarter := [4]int{}
	for _, ts := range starts {
		perQuarter[ts[0].Sub(t0)/(15*time.Minute)]++
	}
	for q, n := range perQuarter {
		if n < 20 || n > 30 {
			t.Errorf("quarter %d of the first hour: %d first checks, want about 25: %v", q, n, perQuarter)
		}
	}
}

func TestDueTellsWhenTheNextCheckMayStart(t *testing.T) {
	s, clk := newTest(t, Config{Policy: PolicyFixed, Budget: 100})
	if _, ok := s.Due("nowhere"); ok {
		t.Error("an unknown key has a due time")
	}
	s.Add("new", "h", RepoState{})
	s.Add("old", "h", RepoState{Cloned: true, LastCheck: t0})
	if due, ok := s.Due("new"); !ok || !due.Equal(clk.Now()) {
		t.Errorf("a repository to clone: due %v %v, want now", due, ok)
	}
	saved := map[string]time.Time{}
	for _, p := range s.Snapshot() {
		saved[string(p.Key)] = p.Due
	}
	if due, ok := s.Due("old"); !ok || !due.Equal(saved["old"]) || !due.After(clk.Now()) {
		t.Errorf("a cloned repository: due %v %v, want its schedule's %v, later than now", due, ok, saved["old"])
	}
	s.Remove("old")
	if _, ok := s.Due("old"); ok {
		t.Error("a removed key has a due time")
	}
}
