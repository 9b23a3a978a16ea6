package series

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func TestCountsLandInTheirMinuteAndTheirHour(t *testing.T) {
	clk := clock.NewFake(t0)
	s := New()
	s.Count(clk.Now(), Counts{Checks: 2, Fetches: 1})
	clk.Advance(30 * time.Second)
	s.Count(clk.Now(), Counts{Checks: 1, Failures: 1, ServedBytes: 100})
	clk.Advance(time.Minute) // 10:01:30
	s.Count(clk.Now(), Counts{Checks: 5})

	day := s.Window(Day, clk.Now(), 0)
	if len(day) != 1440 || !day[1439].Start.Equal(t0.Add(time.Minute)) || !day[0].Start.Equal(t0.Add(time.Minute-24*time.Hour+time.Minute)) {
		t.Fatalf("day: %d buckets from %s to %s", len(day), day[0].Start, day[len(day)-1].Start)
	}
	if got, want := day[1438].Counts, (Counts{Checks: 3, Fetches: 1, Failures: 1, ServedBytes: 100}); got != want {
		t.Errorf("10:00: %+v, want %+v", got, want)
	}
	if got := day[1439].Checks; got != 5 {
		t.Errorf("10:01: %d checks, want 5", got)
	}
	week := s.Window(Week, clk.Now(), 0)
	if len(week) != 168 || !week[167].Start.Equal(t0) {
		t.Fatalf("week: %d buckets, the last from %s", len(week), week[167].Start)
	}
	if got, want := week[167].Counts, (Counts{Checks: 8, Fetches: 1, Failures: 1, ServedBytes: 100}); got != want {
		t.Errorf("the hour of 10:00: %+v, want %+v", got, want)
	}
}

func TestASampleIsTheLastOfItsBucket(t *testing.T) {
	clk := clock.NewFake(t0)
	s := New()
	s.Sample(clk.Now(), Gauges{DiskUsed: 10, Current: 1, Total: 4})
	clk.Advance(20 * time.Second)
	s.Sample(clk.Now(), Gauges{DiskUsed: 20, Current: 3, Total: 4})
	day := s.Window(Day, clk.Now(), 0)
	if b := day[1439]; !b.Sampled || b.Gauges != (Gauges{DiskUsed: 20, Current: 3, Total: 4}) {
		t.Errorf("the minute's sample: %+v", b)
	}
	if day[1438].Sampled {
		t.Error("a minute without a sample says it has one")
	}
}

// A window of fewer points than buckets sums what they counted and keeps
// their last sample.
func TestAWindowOfFewerPointsMergesItsBuckets(t *testing.T) {
	clk := clock.NewFake(t0)
	s := New()
	for i := range 10 { // 10:00 to 10:09
		s.Count(clk.Now(), Counts{Checks: 1, ServedBytes: uint64(i)})
		if i < 7 {
			s.Sample(clk.Now(), Gauges{Current: uint64(i), Total: 10})
		}
		clk.Advance(time.Minute)
	}
	now := t0.Add(9 * time.Minute)
	pts := s.Window(Day, now, 288) // 5 minutes a point
	if len(pts) != 288 {
		t.Fatalf("%d points, want 288", len(pts))
	}
	all := s.Window(Day, now, 0)
	var sum, merged Counts
	for _, b := range all {
		sum.Add(b.Counts)
	}
	for _, p := range pts {
		merged.Add(p.Counts)
	}
	if merged != sum || sum.Checks != 10 || sum.ServedBytes != 45 {
		t.Errorf("the points count %+v, the buckets %+v; want 10 checks, 45 bytes", merged, sum)
	}
	// The window starts 1439 minutes before now's (at 10:10 the day
	// before); the last point holds 10:05 to 10:09, the one before it
	// 10:00 to 10:04, each with its last sample.
	lastPt, before := pts[287], pts[286]
	if !lastPt.Start.Equal(t0.Add(5*time.Minute)) || lastPt.Checks != 5 || lastPt.Current != 6 ||
		!before.Start.Equal(t0) || before.Checks != 5 || before.Current != 4 {
		t.Errorf("the last points: %+v, %+v", before, lastPt)
	}
	if week := s.Window(Week, now, 288); len(week) != 168 {
		t.Errorf("a week in 288 points: %d points, want its 168 hours", len(week))
	}
}

func TestOldBucketsAreForgottenWhenTheirSlotComesRound(t *testing.T) {
	clk := clock.NewFake(t0)
	s := New()
	s.Count(clk.Now(), Counts{Checks: 7})
	clk.Advance(24 * time.Hour) // the same slot of the day's ring
	s.Count(clk.Now(), Counts{Checks: 1})
	day := s.Window(Day, clk.Now(), 0)
	if got := day[1439].Checks; got != 1 {
		t.Errorf("a day later the minute has %d checks, want 1 (yesterday's dropped)", got)
	}
	// The week still has yesterday's hour.
	week := s.Window(Week, clk.Now(), 0)
	if got := week[167-24].Checks; got != 7 {
		t.Errorf("yesterday's hour in the week: %d checks, want 7", got)
	}
	// A count that comes late, for a minute whose slot a newer one took, is
	// not added to the newer.
	s.Count(t0, Counts{Checks: 100})
	if got := s.Window(Day, clk.Now(), 0)[1439].Checks; got != 1 {
		t.Errorf("a late count for a day-old minute went to today's: %d", got)
	}
	// A window long after the last figure is all empty.
	for _, b := range s.Window(Day, clk.Now().Add(48*time.Hour), 0) {
		if b.Checks != 0 || b.Sampled {
			t.Fatalf("two days later: %+v", b)
		}
	}
}

func TestTheStoredBucketsGiveTheSameSeriesBack(t *testing.T) {
	clk := clock.NewFake(t0)
	s := New()
	for i := range 90 { // an hour and a half, a minute apart
		s.Count(clk.Now(), Counts{Checks: uint64(i), ServedBytes: 1 << 40})
		s.Sample(clk.Now(), Gauges{DiskUsed: uint64(i) << 30, Current: uint64(i), Total: 90})
		clk.Advance(time.Minute)
	}
	stored := s.Changed()
	if len(stored) != 90+2 {
		t.Errorf("%d buckets changed, want 90 minutes and 2 hours", len(stored))
	}
	if again := s.Changed(); len(again) != 0 {
		t.Errorf("changed again with nothing new: %d", len(again))
	}
	s.Count(clk.Now(), Counts{Fetches: 1})
	later := s.Changed()
	if len(later) != 2 {
		t.Errorf("one count changed %d buckets, want its minute and its hour", len(later))
	}

	back := New()
	for _, st := range append(stored, later...) {
		if err := back.Restore(st.Key, st.Value); err != nil {
			t.Fatal(err)
		}
	}
	// Restored buckets need no storing again.
	if n := len(back.Changed()); n != 0 {
		t.Errorf("%d restored buckets to store again", n)
	}
	for _, r := range []Range{Day, Week} {
		want, got := s.Window(r, clk.Now(), 0), back.Window(r, clk.Now(), 0)
		for i := range want {
			if want[i] != got[i] {
				t.Fatalf("range %d, bucket %d: %+v, want %+v", r, i, got[i], want[i])
			}
		}
	}
}

func TestRestoreRefusesWhatItDidNotWrite(t *testing.T) {
	s := New()
	good := encode(Bucket{Start: t0, Counts: Counts{Checks: 1}})
	for _, c := range []struct {
		key   string
		value []byte
	}{
		{"x1", good},
		{"m", good},
		{"m1", nil},
		{"m1", []byte{9, 1, 2}},
		{"m1", good[:3]},
		{"h1", encode(Bucket{Start: t0.Add(time.Minute)})}, // not on an hour
		{"m1", encode(Bucket{})},
	} {
		if err := s.Restore(c.key, c.value); err == nil {
			t.Errorf("Restore(%q, %x): no error", c.key, c.value)
		}
	}
	// A stored bucket older than the slot's is dropped, not put back.
	s.Count(t0.Add(24*time.Hour), Counts{Checks: 2})
	if err := s.Restore("m0", good); err != nil {
		t.Fatal(err)
	}
	if got := s.Window(Day, t0.Add(24*time.Hour), 0)[1439].Checks; got != 2 {
		t.Errorf("an old stored bucket replaced a newer one: %d checks", got)
	}
}

func FuzzRestore(f *testing.F) {
	f.Add("m5", encode(Bucket{Start: t0, Counts: Counts{Checks: 3}, Sampled: true}))
	f.Add("h1", encode(Bucket{Start: t0, Gauges: Gauges{Total: 1 << 50}}))
	f.Add("m1", []byte{1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		s := New()
		if err := s.Restore(key, value); err != nil {
			return
		}
		// Whatever it took, it hands back whole.
		for _, r := range []Range{Day, Week} {
			_ = s.Window(r, t0, 0)
		}
	})
}
