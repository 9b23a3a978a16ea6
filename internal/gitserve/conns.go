package gitserve

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// ClientAddr is the client that an address ("host:port", or a bare host)
// stands for, as the public server counts clients: an IPv4 address alone
// (an IPv4-mapped IPv6 one as IPv4), and for IPv6 its /64, which one
// subscriber's line or one host usually holds whole ("2001:db8:1:2::/64").
// Anything that is no IP address is its own client. The fair queue's
// shares and the cap on open connections count the same clients.
func ClientAddr(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip, 64).Masked().String()
}

// ConnLimit caps the connections that one client (ClientAddr) holds open
// at once: a connection over the cap is closed as it is accepted, before
// anything of it is read, and counted. A client that holds thousands of
// idle keep-alive connections so holds at most PerClient file descriptors
// and their buffers, and other clients are served meanwhile.
type ConnLimit struct {
	// PerClient is the cap (0: none).
	PerClient int
	// Log, when set, hears of refused connections: at most one line a
	// client a minute (see clientLog), with the count refused since.
	Log *slog.Logger
	// Clock times the log's limit (default the wall clock).
	Clock clock.Clock

	refused atomic.Int64
	mu      sync.Mutex
	open    map[string]int
	logs    *clientLog
}

// ConnStats counts what a ConnLimit did.
type ConnStats struct {
	Open    int   // connections open now
	Clients int   // clients with a connection open now
	Refused int64 // connections closed at accept, their client at the cap
}

// Stats returns the limit's counts.
func (c *ConnLimit) Stats() ConnStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := ConnStats{Clients: len(c.open), Refused: c.refused.Load()}
	for _, n := range c.open {
		s.Open += n
	}
	return s
}

// Listen returns ln under the limit: its Accept returns only connections
// within their client's cap, and each counts until it is closed.
func (c *ConnLimit) Listen(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, c: c}
}

type limitedListener struct {
	net.Listener
	c *ConnLimit
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := ClientAddr(conn.RemoteAddr().String())
		if l.c.take(client) {
			return &limitedConn{Conn: conn, release: func() { l.c.give(client) }}, nil
		}
		// Closed unread: the client's request, if it sent one, is
		// answered with a reset.
		conn.Close()
		l.c.refuse(client)
	}
}

func (c *ConnLimit) take(client string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.PerClient > 0 && c.open[client] >= c.PerClient {
		return false
	}
	if c.open == nil {
		c.open = map[string]int{}
	}
	c.open[client]++
	return true
}

func (c *ConnLimit) give(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[client]--; c.open[client] <= 0 {
		delete(c.open, client)
	}
}

func (c *ConnLimit) refuse(client string) {
	c.refused.Add(1)
	c.mu.Lock()
	if c.logs == nil {
		c.logs = newClientLog(c.Log, c.Clock)
	}
	logs := c.logs
	c.mu.Unlock()
	logs.log(slog.LevelWarn, client, "connection refused: the client holds as many open as it may",
		"client", client, "max_conns_per_client", c.PerClient)
}

// limitedConn gives its client's place back once, when it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (l *limitedConn) Close() error {
	err := l.Conn.Close()
	l.once.Do(l.release)
	return err
}

// clientLogEvery is how often a client's errors may be logged: one line a
// client a minute, with the count of those not logged since.
const clientLogEvery = time.Minute

// clientLog rate-limits the log lines about one client's errors (a
// refused connection, a malformed request): a client that sends 100,000
// bad requests writes one line a minute, not 100,000. A token bucket a
// client (rate.Limiter, driven by the clock), forgotten once full again.
// A nil *clientLog logs nothing. It is safe for concurrent use.
type clientLog struct {
	out *slog.Logger
	clk clock.Clock

	mu        sync.Mutex
	m         map[string]*clientBucket
	pruneSize int
}

type clientBucket struct {
	lim    *rate.Limiter
	missed int // lines not logged since the last one
}

func newClientLog(log *slog.Logger, clk clock.Clock) *clientLog {
	if log == nil {
		return nil
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &clientLog{out: log, clk: clk, m: map[string]*clientBucket{}}
}

// log logs msg with args about client at level, unless the client had
// its line within clientLogEvery: then it is only counted, and the next
// line that is logged says how many were not ("not_logged").
func (l *clientLog) log(level slog.Level, client, msg string, args ...any) {
	if l == nil {
		return
	}
	now := l.clk.Now()
	l.mu.Lock()
	b := l.m[client]
	if b == nil {
		if len(l.m) > 2*l.pruneSize+1024 {
			for k, b := range l.m {
				if b.missed == 0 && b.lim.TokensAt(now) >= 1 {
					delete(l.m, k)
				}
			}
			l.pruneSize = len(l.m)
		}
		b = &clientBucket{lim: rate.NewLimiter(rate.Every(clientLogEvery), 1)}
		l.m[client] = b
	}
	if !b.lim.AllowN(now, 1) {
		b.missed++
		l.mu.Unlock()
		return
	}
	missed := b.missed
	b.missed = 0
	l.mu.Unlock()
	if missed > 0 {
		args = append(args, "not_logged", missed)
	}
	l.out.Log(context.Background(), level, msg, args...)
}
