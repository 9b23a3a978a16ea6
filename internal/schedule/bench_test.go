package schedule

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// BenchmarkCheck measures one Next and Done of a node holding 100,000
// repositories, at one check per repository per day, for every policy.
func BenchmarkCheck(b *testing.B) {
	for _, policy := range []string{PolicyAdaptive, PolicyFixed, PolicyCompass, PolicySourcegraph} {
		b.Run(policy, func(b *testing.B) {
			repos := benchsize.Of(100_000, 1000)
			clk := clock.NewFake(t0)
			s, err := New(Config{Policy: policy, Budget: float64(repos) / 24, MaxInterval: 7 * 24 * time.Hour}, clk)
			if err != nil {
				b.Fatal(err)
			}
			for i := range repos {
				s.Add(repokey.Key(fmt.Sprint("github.com/r/", i)), fmt.Sprint("h", i%20), RepoState{
					LastCheck:   t0,
					ChangeTimes: []time.Time{t0.Add(-time.Duration(i%1000+1) * time.Hour), t0.Add(-time.Duration(i%100+1) * time.Minute)},
					Cloned:      true,
				})
			}
			change := []time.Time{t0}
			checks := 0
			for b.Loop() {
				key, ok, wait := s.Next()
				if !ok {
					clk.Advance(wait)
					continue
				}
				checks++
				change[0] = clk.Now().Add(-time.Minute)
				s.Done(key, Outcome{Changed: checks%3 == 0, ChangeTimes: change[:checks%3/2]})
			}
			if checks > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(checks), "ns/check")
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	s, clk := newTest(t, Config{Budget: 1000, Concurrency: 4})
	for i := range 100 {
		s.Add(repokey.Key(fmt.Sprint(i)), fmt.Sprint("h", i%3), RepoState{Cloned: i%10 != 0})
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				switch key, ok, _ := s.Next(); {
				case ok:
					s.Done(key, Outcome{Changed: i%2 == 0, Class: FailureClass(i % 3)})
				case w == 0:
					clk.Advance(time.Minute)
				}
				if i%50 == 0 {
					s.Urgent(repokey.Key(fmt.Sprint(i % 100)))
					s.Stats()
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			s.Add(repokey.Key(fmt.Sprint("late", i)), "h9", RepoState{Cloned: true})
			s.Remove(repokey.Key(fmt.Sprint(i % 100)))
			s.Snapshot()
		}
	})
	wg.Wait()
	if st := s.Stats(); st.Running < 0 || st.Running > 4 || s.Len() != 200 {
		t.Errorf("after concurrent use: Stats() = %+v, Len() = %d; want at most 4 running and 200 repositories", st, s.Len())
	}
}

// BenchmarkSetFed measures a host of 50,000 repositories (of 100,000)
// becoming fed and then not, with the adaptive policy: the cost is per
// repository of the host, reported as ns/repo.
func BenchmarkSetFed(b *testing.B) {
	repos := benchsize.Of(100_000, 1000)
	hostRepos := repos / 2
	clk := clock.NewFake(t0)
	s, err := New(Config{Budget: float64(repos) / 24, MaxInterval: 24 * time.Hour}, clk)
	if err != nil {
		b.Fatal(err)
	}
	for i := range repos {
		s.Add(repokey.Key(fmt.Sprint("r/", i)), fmt.Sprint("h", i%2), RepoState{
			LastCheck:   t0.Add(-time.Duration(i%1440) * time.Minute),
			ChangeTimes: []time.Time{t0.Add(-time.Duration(i%1000+1) * time.Hour)},
			Cloned:      true,
		})
		s.SetAnswered(repokey.Key(fmt.Sprint("r/", i)), true)
	}
	s.Stats() // places the first checks
	for b.Loop() {
		s.SetFed("h0", true)
		clk.Advance(time.Minute)
		s.SetFed("h0", false)
		clk.Advance(time.Minute)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N*hostRepos), "ns/repo")
}
