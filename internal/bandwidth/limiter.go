package bandwidth

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter is one token bucket of bytes, shared by every connection it
// paces: together they move no more than its rate. A nil *Limiter is no
// cap: its methods return the connections they are given.
//
// Its bucket holds one chunk (a fiftieth of a second of the rate, from 1
// KiB to 256 KiB) and starts empty, so that over any span the connections
// move at most the rate times the span plus a chunk; a read is paid for
// once its bytes are in, a write before its bytes go out, a chunk at a
// time.
type Limiter struct {
	rate  Rate
	chunk int
	lim   *rate.Limiter
}

// NewLimiter returns a limiter of r bytes per second, or nil for r <= 0.
func NewLimiter(r Rate) *Limiter {
	if r <= 0 {
		return nil
	}
	chunk := int(min(max(r/50, 1<<10), 256<<10))
	l := &Limiter{rate: r, chunk: chunk, lim: rate.NewLimiter(rate.Limit(r), chunk)}
	l.lim.ReserveN(time.Now(), chunk) // start empty
	return l
}

// Rate is the limiter's rate (0 for a nil limiter).
func (l *Limiter) Rate() Rate {
	if l == nil {
		return 0
	}
	return l.rate
}

// take waits until n bytes (at most a chunk) may pass, or until done is
// closed.
func (l *Limiter) take(n int, done <-chan struct{}) {
	d := l.lim.ReserveN(time.Now(), n).Delay()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
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
		c.l.take(n, c.done)
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
		c.l.take(len(b), c.done)
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
