package schedule

import (
	"math"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// learnedRate is the change rate the adaptive policy has learned for key.
func learnedRate(s *Scheduler, key string) float64 { return s.repos[repokey.Key(key)].est.rate.Rate() }

func TestObservedPushesTeachTheAdaptivePolicyTheRate(t *testing.T) {
	s, clk := newTest(t, Config{Budget: 1, MaxInterval: 7 * 24 * time.Hour})
	s.Add("told", "h", cloned(t0))
	s.Add("untold", "h", cloned(t0))
	for range 10 * 6 {
		clk.Advance(4 * time.Hour)
		s.ObservePush("told", clk.Now().Add(-time.Minute))
	}
	if told, untold := learnedRate(s, "told"), learnedRate(s, "untold"); told < 20*untold {
		t.Errorf("after 60 pushes in 10 days: rate %.3g/s told of them, %.3g/s not; want the first far higher", told, untold)
	}
	if got := s.repos["told"].lastChange; !got.Equal(clk.Now().Add(-time.Minute)) {
		t.Errorf("last change %v, want the last push", got)
	}
}

func TestAPushIsCountedOnceWhetherTheFeedOrACheckSeesItFirst(t *testing.T) {
	push := t0.Add(3 * time.Hour)
	checkAt := t0.Add(5 * time.Hour)
	tests := []struct {
		name string
		// before and after the check at checkAt
		feedBefore, feedAfter bool
		checkTimes            []time.Time
	}{
		{"check only, with the change's time", false, false, []time.Time{push}},
		{"feed, then a check with the change's time", true, false, []time.Time{push}},
		{"feed, then a check that cannot tell when", true, false, nil},
		{"check, then the feed", false, true, []time.Time{push}},
		{"check that cannot tell when, then the feed", false, true, nil},
		{"feed before and after the check", true, true, nil},
	}
	var want float64
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newTest(t, Config{Budget: 1, MaxInterval: 7 * 24 * time.Hour})
			s.Add("a", "h", cloned(t0))
			clk.Set(push.Add(time.Hour))
			if tt.feedBefore {
				s.ObservePush("a", push)
			}
			clk.Set(checkAt)
			s.Urgent("a")
			if key, ok, _ := s.Next(); !ok || key != "a" {
				t.Fatalf("Next = %q, %v; want a", key, ok)
			}
			s.Done("a", Outcome{Changed: true, ChangeTimes: tt.checkTimes, Fetched: true})
			if tt.feedAfter {
				s.ObservePush("a", push)
			}
			clk.Set(t0.Add(24 * time.Hour))
			s.ObservePush("a", push) // decays the counts to the same time in every case
			got := learnedRate(s, "a")
			if i == 0 {
				want = got
				return
			}
			// A check that cannot tell when counts the change at the
			// check, two hours after the push: decayed 2h/60d less.
			if math.Abs(got-want) > 2e-3*want {
				t.Errorf("rate %.6g/s, want %.6g/s as when only a check saw the push", got, want)
			}
		})
	}
}

func TestObservePushIgnoresUnknownKeysAndZeroTimes(t *testing.T) {
	s, _ := newTest(t, Config{})
	s.Add("a", "h", cloned(t0))
	before := learnedRate(s, "a")
	s.ObservePush("a", time.Time{})
	s.ObservePush("nope", t0)
	if after := learnedRate(s, "a"); after != before {
		t.Errorf("rate moved from %v to %v on a zero push time", before, after)
	}
	if _, ok := s.repos["nope"]; ok {
		t.Error("an unknown key was added")
	}
}

func TestObservePushMovesTheLastChangeOfEveryPolicy(t *testing.T) {
	for _, p := range []string{PolicyFixed, PolicyCompass, PolicySourcegraph} {
		s, _ := newTest(t, Config{Policy: p})
		s.Add("a", "h", cloned(t0))
		s.ObservePush("a", t0.Add(-time.Hour))
		if got := s.repos["a"].lastChange; !got.Equal(t0.Add(-time.Hour)) {
			t.Errorf("%s: last change %v, want the push", p, got)
		}
	}
}

func TestAPushInTheFutureDoesNotHideTheNextOnes(t *testing.T) {
	s, clk := newTest(t, Config{Budget: 1})
	s.Add("a", "h", cloned(t0))
	s.Add("b", "h", cloned(t0))
	clk.Advance(time.Hour)
	s.ObservePush("a", t0.Add(100*365*24*time.Hour))
	s.ObservePush("b", clk.Now())
	clk.Advance(24 * time.Hour)
	s.ObservePush("a", clk.Now())
	s.ObservePush("b", clk.Now())
	if a, b := learnedRate(s, "a"), learnedRate(s, "b"); a != b {
		t.Errorf("rate %v after a push dated in 2126, %v after one dated now; want the same", a, b)
	}
}

func TestAPushToldDuringACheckIsCountedOnce(t *testing.T) {
	// The check starts at 5:00, the feed tells of a push at 5:01 while it
	// runs; the check asked for then finds the change without its time.
	count := func(tellDuringCheck bool) float64 {
		s, clk := newTest(t, Config{Budget: 1, MaxInterval: 7 * 24 * time.Hour})
		s.Add("a", "h", cloned(t0))
		clk.Set(t0.Add(5 * time.Hour))
		s.Urgent("a")
		s.Next()
		clk.Advance(2 * time.Minute)
		if tellDuringCheck {
			s.ObservePush("a", t0.Add(5*time.Hour+time.Minute))
			s.Urgent("a")
		}
		s.Done("a", success)
		if !tellDuringCheck {
			s.ObservePush("a", t0.Add(5*time.Hour+time.Minute))
			s.Urgent("a")
		}
		if key, ok, _ := s.Next(); !ok || key != "a" {
			t.Fatalf("Next = %q, %v; want a", key, ok)
		}
		s.Done("a", Outcome{Changed: true, Fetched: true})
		return learnedRate(s, "a")
	}
	// The same counts, decayed in another order.
	if during, after := count(true), count(false); math.Abs(during-after) > 1e-4*after {
		t.Errorf("rate %v when the push was told during the check, %v when after it; want the same", during, after)
	}
}
