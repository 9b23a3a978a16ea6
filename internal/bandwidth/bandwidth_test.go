package bandwidth

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

func TestParseReadsRatesAsPeopleWriteThem(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rate
	}{
		{"", 0},
		{"0", 0},
		{"0MiB/s", 0},
		{"20Mbit", 2_500_000},
		{"20Mbit/s", 2_500_000},
		{"20 Mbit", 2_500_000},
		{"100Mbps", 12_500_000},
		{"100mbps", 12_500_000},
		{"512kbit/s", 64_000},
		{"1Gbit", 125_000_000},
		{"8Mibit", 1 << 20},
		{"2MiB/s", 2 << 20},
		{"2MiB", 2 << 20},
		{"2MiBps", 2 << 20},
		{"1.5MB/s", 1_500_000},
		{"500KB", 500_000},
		{"500kB/s", 500_000},
		{"64KiB/s", 64 << 10},
		{"1GiB/s", 1 << 30},
		{"1000B/s", 1000},
		{"8000bps", 1000},
		{"  3MB/s  ", 3_000_000},
	} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseSaysWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		in, says string
	}{
		{"20", "no unit"},
		{"20M", `unknown unit "M"`},
		{"20Mbyte", `unknown unit "Mbyte"`},
		{"fast", "must start with a number"},
		{"-2MiB/s", "must start with a number"},
		{"1.2.3MB", "is not a number"},
		{".MB", "is not a number"},
		{"1e9B", `unknown unit "e9B"`},
		{"100B/s", "under 1000B/s"},
		{"7kbit", "under 1000B/s"},
		{"99999999999999999999GiB", "too large"},
	} {
		_, err := Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.in) {
			t.Errorf("Parse(%q) = %v; want an error naming the input and saying %q", c.in, err, c.says)
		}
	}
	if _, err := Parse("20M"); !errors.Is(err, ErrSyntax) {
		t.Errorf("a unit that is not one wraps ErrSyntax: %v", err)
	}
}

func TestRateStringReadsBack(t *testing.T) {
	for r, want := range map[Rate]string{0: "none", 1000: "1000B/s", 2 << 20: "2MiB/s", 2_500_000: "2.38MiB/s", 64 << 10: "64KiB/s"} {
		if got := r.String(); got != want {
			t.Errorf("Rate(%d).String() = %q, want %q", r, got, want)
		}
	}
	for _, r := range []Rate{1000, 64 << 10, 2 << 20, 1 << 30} {
		if back, err := Parse(r.String()); err != nil || back != r {
			t.Errorf("Parse(%q) = %d, %v; want %d", r.String(), back, err, r)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"20Mbit", "2MiB/s", "100Mbps", "0", "", "1.5MB/s", "512kbit/s", "20M", "-1B", "1e3B", "9GiBps"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			if r != 0 {
				t.Fatalf("Parse(%q) failed with a rate %d", s, r)
			}
			return
		}
		if r != 0 && r < MinRate {
			t.Fatalf("Parse(%q) = %d, under MinRate", s, r)
		}
	})
}

func TestNilLimiterIsNoCap(t *testing.T) {
	var l *Limiter
	if NewLimiter(0) != nil || l.Rate() != 0 {
		t.Fatal("a rate of 0 is no limiter")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if l.PaceReads(a) != a || l.PaceWrites(b) != b {
		t.Fatal("a nil limiter returns the connections it is given")
	}
}

// pipeThrough moves size bytes over a loopback TCP connection whose
// receiving end (or sending end, for sender) pace wraps, and returns what
// was moved, and when the move started and ended on clk.
func pipeThrough(clk clock.Clock, size int, pace func(net.Conn) net.Conn, sender bool) (moved int64, start, end time.Time, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, start, end, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	out, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, start, end, err
	}
	in := <-accepted
	if in == nil {
		out.Close()
		return 0, start, end, errors.New("accept failed")
	}
	defer in.Close()
	defer out.Close()
	if sender {
		out = pace(out)
	} else {
		in = pace(in)
	}
	start = clk.Now()
	go func() {
		_, _ = out.Write(make([]byte, size))
		out.Close()
	}()
	moved, err = io.Copy(io.Discard, in)
	return moved, start, clk.Now(), err
}

// driveStep is how far fakeLimiter's clock moves at a time while a
// connection waits for the bucket: the most a transfer may overshoot the
// time its schedule ends.
const driveStep = time.Millisecond

// fakeLimiter is a limiter of r on a fake clock that moves while a
// connection waits for the bucket, until the test ends: the transfers of
// the tests run their schedule on its time, which a busy machine does not
// stretch.
func fakeLimiter(t *testing.T, r Rate) (*Limiter, *clock.Fake) {
	clk := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	t.Cleanup(clk.StartDriving(driveStep))
	return NewLimiterOn(r, clk), clk
}

func TestLimiterPacesReadsToItsRate(t *testing.T) {
	const r = 1 << 20
	l, clk := fakeLimiter(t, r)
	moved, start, end, err := pipeThrough(clk, 2<<20, l.PaceReads, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPace(t, l, moved, end.Sub(start))
}

func TestLimiterPacesWritesToItsRate(t *testing.T) {
	const r = 1 << 20
	l, clk := fakeLimiter(t, r)
	moved, start, end, err := pipeThrough(clk, 2<<20, l.PaceWrites, true)
	if err != nil {
		t.Fatal(err)
	}
	checkPace(t, l, moved, end.Sub(start))
}

// TestConnectionsShareOneBucket: two connections, one read and one
// written, move together no more than the rate.
func TestConnectionsShareOneBucket(t *testing.T) {
	const r = 1 << 20
	l, clk := fakeLimiter(t, r)
	var wg sync.WaitGroup
	var moved [2]int64
	var starts, ends [2]time.Time
	var errs [2]error
	for i, sender := range []bool{false, true} {
		pace := l.PaceReads
		if sender {
			pace = l.PaceWrites
		}
		wg.Go(func() { moved[i], starts[i], ends[i], errs[i] = pipeThrough(clk, 1<<20, pace, sender) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	first, last := starts[0], ends[0]
	if starts[1].Before(first) {
		first = starts[1]
	}
	if ends[1].After(last) {
		last = ends[1]
	}
	checkPace(t, l, moved[0]+moved[1], last.Sub(first))
}

// checkPace holds moved bytes in took, on the limiter's clock, to the
// rate: at least the time the rate implies for all but the chunk the
// bucket may hold when the span starts, and at most the time for all of
// them and the step by which the test's clock moves. The clock moves only
// while a connection waits for the bucket, so that took is the limiter's
// schedule: a limiter that charged bytes twice, or lost time between
// chunks, takes longer on any machine, and a busy one does not.
func checkPace(t *testing.T, l *Limiter, moved int64, took time.Duration) {
	t.Helper()
	r := l.Rate()
	least := time.Duration(float64(moved-int64(l.Burst())) / float64(r) * float64(time.Second))
	want := time.Duration(float64(moved) / float64(r) * float64(time.Second))
	ratio := float64(took) / float64(want)
	t.Logf("%d bytes in %v at %s: %.3f of the time the rate implies (%v)", moved, took, r, ratio, want)
	// The clock is driven in steps by a goroutine that a busy machine may
	// run late, a step or a few past the last byte: the upper bound allows
	// 5% (a limiter that paced at half its rate would take 2x).
	most := want + max(driveStep, want/20)
	if took < least || took > most {
		t.Fatalf("%d bytes took %v; the rate %s implies %v (ratio %.3f, want at least %v and at most %v)", moved, took, r, want, ratio, least, most)
	}
}

func TestCloseEndsAWaitForTheBucket(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	l := NewLimiterOn(MinRate, clk) // a chunk takes a second, on a clock that stands still
	a, b := net.Pipe()
	defer b.Close()
	p := l.PaceWrites(a)
	done := make(chan error, 1)
	go func() {
		_, err := p.Write(make([]byte, 64<<10)) // a minute's worth
		done <- err
	}()
	go func() { _, _ = io.Copy(io.Discard, b) }()
	// The writer waits for tokens once it has a timer on the clock.
	for deadline := time.Now().Add(time.Minute); clk.Timers() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer never waited for the bucket")
		}
	}
	p.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a write cut by Close reports no error")
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not end the write's wait for the bucket")
	}
}

// TestAConnectionBackLateKeepsItsPlace: a connection that wakes late
// halfway (as a busy machine wakes it) catches up, so that the transfer
// as a whole keeps to the rate rather than taking the stall on top; past
// maxLate it has lost its place and the stall counts. The schedule is
// played on the limiter's rule with the times given, so that it holds on
// any machine.
func TestAConnectionBackLateKeepsItsPlace(t *testing.T) {
	const r, size = 1 << 20, 2 << 20
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		stall    time.Duration
		keepsPos bool
	}{
		{0, true},
		{400 * time.Millisecond, true},
		{maxLate - time.Millisecond, true},
		{maxLate + 200*time.Millisecond, false},
	} {
		l := NewLimiter(r)
		l.next = start
		chunk := time.Duration(float64(l.Burst()) / r * float64(time.Second))
		now, due, end := start, start, start
		stalled, moved := false, 0
		for ; moved < size; moved += l.Burst() {
			if moved >= size/2 && !stalled {
				now, stalled = now.Add(tt.stall), true // the goroutine wakes late once
			}
			end = l.reserve(l.Burst(), &due, now)
			now = later(now, end) // it wakes when its bytes may pass
		}
		if !stalled {
			t.Fatal("the schedule never stalled: the test proves nothing")
		}
		took, rateTime := end.Sub(start), l.duration(moved) // about 2 s
		if tt.keepsPos && (took < rateTime-chunk || took > rateTime) {
			t.Errorf("stalled %v: the transfer took %v, want the rate's %v (a chunk less at most): the stall was taken on top", tt.stall, took, rateTime)
		}
		if !tt.keepsPos && took < rateTime+tt.stall-2*chunk {
			t.Errorf("stalled %v, past maxLate (%v): the transfer took %v, want at least %v: a connection back that late kept its place", tt.stall, maxLate, took, rateTime+tt.stall-2*chunk)
		}
	}
}
