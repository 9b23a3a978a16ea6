package feedplan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// t0 is a Monday, 00:00 UTC.
var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func newTest(t *testing.T, opts Options) *Planner {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	return p
}

// every returns the times from-to (exclusive) that are a multiple of
// period after t0.
func every(period time.Duration, from, to time.Time) []time.Time {
	var out []time.Time
	for t := t0.Add(from.Sub(t0).Truncate(period)); t.Before(to); t = t.Add(period) {
		if !t.Before(from) {
			out = append(out, t)
		}
	}
	return out
}

// feed runs p as a feed would for the span from t0 to end: a batch of
// batch keys every period, each answered with the latest of its pushes
// (sorted) at or before the ask. It returns the ask times of each key.
func feed(p *Planner, end time.Time, period time.Duration, batch int, pushes map[string][]time.Time) map[string][]time.Time {
	asks := map[string][]time.Time{}
	for now := t0; now.Before(end); now = now.Add(period) {
		for _, k := range p.Next(now, batch) {
			asks[k] = append(asks[k], now)
			var last time.Time
			ts := pushes[k]
			if i, found := slices.BinarySearchFunc(ts, now, time.Time.Compare); found {
				last = ts[i]
			} else if i > 0 {
				last = ts[i-1]
			}
			p.Observe(k, now, last)
		}
	}
	return asks
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{PerHour: -1},
		{PerHour: 1, MaxInterval: -time.Hour},
		{PerHour: 1, MinInterval: 2 * time.Hour, MaxInterval: time.Hour},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func TestBusyRepositoriesAreAskedAboutMoreOften(t *testing.T) {
	// 90 repositories pushed once a week, 10 pushed every 3 hours; the
	// budget asks about each every 2 hours on average.
	p := newTest(t, Options{PerHour: 50, MaxInterval: 7 * 24 * time.Hour})
	period := func(key string) time.Duration {
		if strings.HasPrefix(key, "busy") {
			return 3 * time.Hour
		}
		return 7 * 24 * time.Hour
	}
	end := t0.Add(7 * 24 * time.Hour)
	var keys []string
	pushes := map[string][]time.Time{}
	for i := range 100 {
		k := fmt.Sprintf("quiet%02d", i)
		if i < 10 {
			k = fmt.Sprintf("busy%02d", i)
		}
		keys = append(keys, k)
		pushes[k] = every(period(k), t0.Add(-30*24*time.Hour), end)
		p.Add(k, t0, every(period(k), t0.Add(-30*24*time.Hour), t0))
	}
	asks := feed(p, end, time.Hour/5, 10, pushes)
	var busy, quiet int
	for _, k := range keys {
		if strings.HasPrefix(k, "busy") {
			busy += len(asks[k])
		} else {
			quiet += len(asks[k])
		}
	}
	if busy/10 < 4*quiet/90 {
		t.Errorf("asks a repository in a week: busy %d, quiet %d; want the busy ones asked about far more often", busy/10, quiet/90)
	}
	// More repositories than the budget covers: it is spent, but never
	// overspent.
	if total, budget := busy+quiet, 7*24*50; total > budget || total < budget*8/10 {
		t.Errorf("%d asks in a week, want most of the budget's %d and no more", total, budget)
	}
}

func TestEveryRepositoryIsAskedAboutWithinMaxInterval(t *testing.T) {
	// Repositories that never change and one that changes every minute:
	// the budget would rather not ask about any of them, but every one is
	// asked about at least once a day.
	const maxInterval = 24 * time.Hour
	p := newTest(t, Options{PerHour: 20, MaxInterval: maxInterval})
	for i := range 100 {
		p.Add(fmt.Sprint(i), t0, nil)
	}
	p.Add("hot", t0, every(time.Minute, t0.Add(-24*time.Hour), t0))
	end := t0.Add(10 * 24 * time.Hour)
	asks := feed(p, end, time.Hour/2, 10, map[string][]time.Time{"hot": every(time.Minute, t0.Add(-24*time.Hour), end)})
	for k, ts := range asks {
		ts = append(append([]time.Time{t0}, ts...), end)
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap > maxInterval+time.Hour/2 {
				t.Errorf("%s: not asked about from %v to %v", k, ts[i-1], ts[i])
				break
			}
		}
	}
	if len(asks) != 101 {
		t.Errorf("%d repositories asked about, want 101", len(asks))
	}
}

func TestNextFillsTheBatchWithoutRepeats(t *testing.T) {
	p := newTest(t, Options{PerHour: 1})
	for _, k := range []string{"a", "b", "c"} {
		p.Add(k, t0, nil)
	}
	got := p.Next(t0.Add(24*time.Hour), 100) // each due by then
	slices.Sort(got)
	if fmt.Sprint(got) != "[a b c]" {
		t.Errorf("Next(100) of 3 keys = %v, want each once", got)
	}
	if got := p.Next(t0, 0); got != nil {
		t.Errorf("Next(0) = %v", got)
	}
}

func TestAnUnansweredAskIsNotAChange(t *testing.T) {
	p := newTest(t, Options{PerHour: 10})
	p.Add("a", t0, nil)
	p.Add("b", t0, nil)
	for _, k := range p.Next(t0, 2) {
		p.Observe(k, t0, time.Time{})
	}
	p.Observe("a", t0.Add(time.Hour), t0.Add(30*time.Minute))
	if ia, ib := p.Interval("a"), p.Interval("b"); ia >= ib {
		t.Errorf("intervals: a %v (pushed), b %v (not answered); want a's shorter", ia, ib)
	}
	before := p.Interval("a")
	p.Observe("a", t0.Add(time.Hour), t0.Add(30*time.Minute)) // the same push again
	if after := p.Interval("a"); after != before {
		t.Errorf("a push reported twice moved the interval from %v to %v", before, after)
	}
}

func TestRemovedRepositoriesAreNotAskedAbout(t *testing.T) {
	p := newTest(t, Options{PerHour: 10})
	for _, k := range []string{"a", "b", "c", "d"} {
		p.Add(k, t0, nil)
	}
	p.Remove("b")
	p.Remove("nope")
	p.Add("e", t0, nil) // takes b's place
	p.Add("a", t0, nil) // already there
	if p.Len() != 4 {
		t.Errorf("Len() = %d, want 4", p.Len())
	}
	got := p.Next(t0.Add(25*time.Hour), 10) // each due by then
	slices.Sort(got)
	if fmt.Sprint(got) != "[a c d e]" {
		t.Errorf("Next = %v, want [a c d e]", got)
	}
	if p.Interval("b") != 0 {
		t.Error("a removed key still has an interval")
	}
}

func TestAPushInTheFutureDoesNotHideTheNextOnes(t *testing.T) {
	p := newTest(t, Options{PerHour: 1, MaxInterval: 7 * 24 * time.Hour})
	for _, k := range []string{"a", "b", "quiet1", "quiet2", "quiet3"} {
		p.Add(k, t0, nil)
	}
	p.Observe("a", t0, t0.Add(100*365*24*time.Hour))
	p.Observe("b", t0, t0)
	for d := 1; d <= 5; d++ {
		now := t0.Add(time.Duration(d) * 24 * time.Hour)
		p.Observe("a", now, now.Add(-time.Hour))
		p.Observe("b", now, now.Add(-time.Hour))
	}
	if a, b, q := p.Interval("a"), p.Interval("b"), p.Interval("quiet1"); a != b || a >= q {
		t.Errorf("intervals: %v after a push dated in 2126, %v after one dated at the ask, %v never pushed; want the first two equal and shorter", a, b, q)
	}
}

// A feed of 12 quiet repositories on a token of 4,000 requests an hour
// (100 repositories a request, as GitHub's GraphQL answers) asks about
// each at most once a MinInterval: a request a minute, not the budget's
// 66. The feed calls Next at the budget's pace, as coordinator.runFeed
// does when something is due.
func TestAFewQuietRepositoriesLeaveTheBudgetUnspent(t *testing.T) {
	const perHour, batch, minutes = 4000, 100, 120
	p := newTest(t, Options{PerHour: perHour * batch})
	for i := range 12 {
		p.Add(fmt.Sprintf("quiet%02d", i), t0, nil)
	}
	requests, asks := 0, map[string][]time.Time{}
	pace := time.Duration(float64(time.Hour) / perHour)
	for now := t0; now.Before(t0.Add(minutes * time.Minute)); now = now.Add(pace) {
		keys := p.Next(now, batch)
		if len(keys) > 0 {
			requests++
		}
		for _, k := range keys {
			asks[k] = append(asks[k], now)
			p.Observe(k, now, t0.Add(-30*24*time.Hour))
		}
	}
	for k, ts := range asks {
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap < time.Minute {
				t.Fatalf("%s asked about twice in %v (at %v and %v); want at most once a minute", k, gap, ts[i-1], ts[i])
			}
		}
	}
	if n := len(asks); n != 12 {
		t.Fatalf("%d repositories asked about, want 12", n)
	}
	// At most 12 asks a minute; in batches, about a request a minute.
	total := 0
	for _, ts := range asks {
		total += len(ts)
	}
	if max := 12 * minutes; total > max {
		t.Errorf("%d asks in %d minutes, want at most %d", total, minutes, max)
	}
	if max := 2 * minutes; requests > max {
		t.Errorf("%d requests in %d minutes, want at most about one a minute (%d)", requests, minutes, max)
	}
	t.Logf("%d requests, %d asks in %d minutes (the budget: %d requests)", requests, total, minutes, perHour*minutes/60)
}

// A forge's X-Poll-Interval raises the least time between two asks.
func TestSetMinIntervalSpacesTheAsks(t *testing.T) {
	p := newTest(t, Options{PerHour: 1e6})
	p.Add("a", t0, nil)
	if got := p.SetMinInterval(5 * time.Minute); got != 5*time.Minute {
		t.Fatalf("SetMinInterval(5m) = %v", got)
	}
	if got := p.SetMinInterval(time.Second); got != 5*time.Minute {
		t.Fatalf("SetMinInterval(1s) after 5m = %v; a shorter one must not lower it", got)
	}
	var asks []time.Time
	for now := t0; now.Before(t0.Add(time.Hour)); now = now.Add(time.Second) {
		if len(p.Next(now, 10)) > 0 {
			asks = append(asks, now)
			p.Observe("a", now, t0.Add(-time.Hour))
		}
	}
	if n := len(asks); n == 0 || n > 12 {
		t.Fatalf("asked about %d times in an hour at a 5m poll interval (%v); want at most 12", n, asks)
	}
}

// A repository is fed only while the forge's last answer for it is
// younger than FedMaxAge: one never answered for (unknown to the forge,
// or the feed held back) is not, and one answered for loses it when the
// answers stop.
func TestFedOnlyWhileAnswered(t *testing.T) {
	p := newTest(t, Options{PerHour: 1e6, FedMaxAge: 10 * time.Minute})
	p.Add("answered", t0, nil)
	p.Add("unknown", t0, nil)
	p.Observe("answered", t0, t0.Add(-time.Hour))
	p.Observe("unknown", t0, time.Time{}) // the forge did not answer for it
	gained, lost := p.Coverage(t0)
	if fmt.Sprint(gained, lost) != "[answered] []" || p.FedCount() != 1 {
		t.Fatalf("Coverage = %v, %v (%d fed); want answered gained", gained, lost, p.FedCount())
	}
	if !p.Fed("answered", t0.Add(10*time.Minute)) || p.Fed("unknown", t0) {
		t.Fatal("Fed: want answered fed within its age, unknown never")
	}
	if gained, lost := p.Coverage(t0.Add(5 * time.Minute)); len(gained)+len(lost) != 0 {
		t.Fatalf("Coverage with nothing new = %v, %v", gained, lost)
	}
	// The forge stops answering (a rate limit, say): past the age, lost.
	later := t0.Add(11 * time.Minute)
	if p.Fed("answered", later) {
		t.Fatal("Fed past FedMaxAge without an answer")
	}
	if gained, lost := p.Coverage(later); fmt.Sprint(gained, lost) != "[] [answered]" || p.FedCount() != 0 {
		t.Fatalf("Coverage past the age = %v, %v (%d fed); want answered lost", gained, lost, p.FedCount())
	}
	p.Observe("answered", later, t0.Add(-time.Hour))
	if gained, _ := p.Coverage(later); fmt.Sprint(gained) != "[answered]" {
		t.Fatalf("an answer again gained %v; want answered", gained)
	}
}

// Without FedMaxAge, an answer keeps a repository fed for twice its
// interval.
func TestFedMaxAgeDefaultsToTwiceTheInterval(t *testing.T) {
	p := newTest(t, Options{PerHour: 1e6})
	p.Add("a", t0, nil)
	p.Observe("a", t0, t0.Add(-time.Hour))
	iv := p.Interval("a")
	if !p.Fed("a", t0.Add(2*iv)) || p.Fed("a", t0.Add(2*iv+time.Second)) {
		t.Fatalf("interval %v: want fed for 2x it and no longer", iv)
	}
}

// A failed request teaches nothing: its keys are due again at once, not a
// whole interval later.
func TestAFailedRequestsKeysAreDueAgainAtOnce(t *testing.T) {
	p := newTest(t, Options{PerHour: 1e6})
	p.Add("a", t0, nil)
	now := t0.Add(time.Hour)
	keys := p.Next(now, 10)
	if fmt.Sprint(keys) != "[a]" {
		t.Fatalf("Next = %v", keys)
	}
	if got := p.Next(now.Add(time.Second), 10); got != nil {
		t.Fatalf("Next a second after an ask = %v; want nothing due", got)
	}
	p.Failed(keys, now)
	if got := p.Next(now.Add(time.Second), 10); fmt.Sprint(got) != "[a]" {
		t.Fatalf("Next after a failed request = %v; want a again", got)
	}
}
