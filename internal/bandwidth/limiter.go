package bandwidth

import (
	"net"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// Limiter is one token bucket of bytes, shared by every connection it
// paces: together they move no more than its rate. A nil *Limiter is no
// cap: its methods return the connections they are given.
//
// Its bucket holds one chunk (a fiftieth of a second of the rate, from 1
// KiB to 256 KiB) and starts empty, so that from when a transfer starts
// the connections move at most the rate times the time passed plus a
// chunk; a read is paid for once its bytes are in, a write before its
// bytes go out, a chunk at a time. A connection whose goroutine wakes late
// (a busy machine wakes it tens of milliseconds late) keeps its place in
// the schedule, up to maxLate, and catches up: its transfer as a whole
// keeps to the rate rather than losing the time the machine lost.
//
// It is gitfleet's one token bucket of its own (the webhook pacing and the
// scheduler's limits are golang.org/x/time/rate limiters): rate.Limiter
// cannot hold a connection's place in the schedule when it wakes late
// (its reservations count from the time given, and a time before its last
// one does not go back), starts full rather than empty, and its WaitN
// waits on the wall clock, where this one waits on the injected clock.
type Limiter struct {
	rate  Rate
	chunk int
	clk   clock.Clock

	mu sync.Mutex
	// next is when the bytes paid for so far may all have passed, at the
	// rate: a virtual clock of the bucket, which never runs more than a
	// chunk behind the wall clock, but for a connection woken late.
	next time.Time
}

// maxLate is the most of its place in the schedule a connection keeps
// when it comes back late from a wait.
const maxLate = 500 * time.Millisecond

// NewLimiter returns a limiter of r bytes per second on the wall clock, or
// nil for r <= 0.
func NewLimiter(r Rate) *Limiter { return NewLimiterOn(r, clock.Real{}) }

// NewLimiterOn is NewLimiter with its waits on clk: a test that paces real
// connections on a clock.Fake (Fake.Drive) sees the time the schedule
// takes, whatever the machine's load does to the goroutines around it.
func NewLimiterOn(r Rate, clk clock.Clock) *Limiter {
	if r <= 0 {
		return nil
	}
	return &Limiter{rate: r, chunk: int(min(max(r/50, 1<<10), 256<<10)), clk: clk, next: clk.Now()}
}

// Rate is the limiter's rate (0 for a nil limiter).
func (l *Limiter) Rate() Rate {
	if l == nil {
		return 0
	}
	return l.rate
}

// Burst is the most bytes that may pass at once after the connections were
// idle: the bucket's size (0 for a nil limiter).
func (l *Limiter) Burst() int {
	if l == nil {
		return 0
	}
	return l.chunk
}

// take pays for n bytes (at most a chunk) of a connection and waits until
// they may pass, or until done is closed.
func (l *Limiter) take(n int, due *time.Time, done <-chan struct{}) {
	now := l.clk.Now()
	wait := l.reserve(n, due, now).Sub(now)
	if wait <= 0 {
		return
	}
	t := l.clk.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C():
	case <-done:
	}
}

// reserve pays for n bytes of a connection at now and returns when they
// may pass. due is when the connection's last bytes were to pass: a
// connection back from a wait later than that, by less than maxLate,
// keeps its place in the schedule. It is the limiter's whole rule, with
// the time given, so that tests can play any schedule of wake-ups.
func (l *Limiter) reserve(n int, due *time.Time, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := now
	if late := now.Sub(*due); late > 0 && late < maxLate {
		from = *due
	}
	l.next = later(l.next, from.Add(-l.duration(l.chunk)))
	l.next = l.next.Add(l.duration(n))
	*due = l.next
	return l.next
}

// duration is how long n bytes take at the rate.
func (l *Limiter) duration(n int) time.Duration {
	return time.Duration(float64(n) / float64(l.rate) * float64(time.Second))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// PaceReads returns c with what is read from it paced by l.
func (l *Limiter) PaceReads(c net.Conn) net.Conn {
	if l == nil {
		return c
	}
	return &pacedConn{Conn: c, l: l, reads: true, done: make(chan struct{})}
}

// PaceWrites returns c with what is written to it paced by l.
func (l *Limiter) PaceWrites(c net.Conn) net.Conn {
	if l == nil {
		return c
	}
	return &pacedConn{Conn: c, l: l, done: make(chan struct{})}
}

// PaceAccepted returns ln with the writes to every connection it accepts
// paced by l.
func (l *Limiter) PaceAccepted(ln net.Listener) net.Listener {
	if l == nil {
		return ln
	}
	return pacedListener{ln, l}
}

type pacedListener struct {
	net.Listener
	l *Limiter
}

func (p pacedListener) Accept() (net.Conn, error) {
	c, err := p.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return p.l.PaceWrites(c), nil
}

// pacedConn paces one direction of a connection: its reads or its writes.
type pacedConn struct {
	net.Conn
	l     *Limiter
	reads bool
	due   time.Time     // when its last bytes were to pass (under l.mu)
	done  chan struct{} // closed by Close: a wait for the bucket ends
	once  sync.Once
}

func (c *pacedConn) Read(p []byte) (int, error) {
	if !c.reads {
		return c.Conn.Read(p)
	}
	if len(p) > c.l.chunk {
		p = p[:c.l.chunk]
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.l.take(n, &c.due, c.done)
	}
	return n, err
}

func (c *pacedConn) Write(p []byte) (int, error) {
	if c.reads {
		return c.Conn.Write(p)
	}
	written := 0
	for len(p) > 0 {
		b := p[:min(len(p), c.l.chunk)]
		c.l.take(len(b), &c.due, c.done)
		n, err := c.Conn.Write(b)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

func (c *pacedConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as *net.TCPConn does (the egress
// proxy's splice passes a client's end of request on).
func (c *pacedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
