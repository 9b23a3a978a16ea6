package gitserve_test

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitserve"
)

func TestClientAddrCountsAnIPv6Slash64AsOneClient(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"192.0.2.7:4711", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:4711", "192.0.2.7"},
		{"[2001:db8:1:2::1]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff:ffff:ffff:ffff]:1", "2001:db8:1:2::/64"},
		{"[2001:db8:1:3::1]:443", "2001:db8:1:3::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"[::1]:80", "::/64"},
		{"192.0.2.7", "192.0.2.7"},
		{"pipe", "pipe"},
	} {
		if got := gitserve.ClientAddr(tc.addr); got != tc.want {
			t.Errorf("ClientAddr(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// lockedBuffer is a log's output, read while the server writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// capServer serves "ok" on network's loopback address under a cap of
// perClient connections a client address.
func capServer(t *testing.T, network, addr string, perClient int) (*gitserve.ConnLimit, string, *lockedBuffer) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s loopback here: %v", network, err)
	}
	var logs lockedBuffer
	lim := &gitserve.ConnLimit{PerClient: perClient, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })}
	go func() { _ = srv.Serve(lim.Listen(ln)) }()
	t.Cleanup(func() { srv.Close() })
	return lim, ln.Addr().String(), &logs
}

// keepAlive dials addr from local (nil: any address), makes one request
// and keeps the connection open; ok is false when the server closed it
// without an answer.
func keepAlive(t *testing.T, local net.Addr, addr string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return conn, false
	}
	resp.Body.Close()
	return conn, resp.StatusCode == http.StatusOK
}

// A hostile client opens keep-alive connections from one address: those
// over the cap are closed unanswered while another address is served,
// and a connection it closes gives its place back.
func TestConnectionsOverAnAddressCapAreRefusedWhileAnotherAddressIsServed(t *testing.T) {
	const perClient = 4
	lim, addr, logs := capServer(t, "tcp4", "127.0.0.1:0", perClient)
	hostile := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	var held []net.Conn
	for i := range perClient {
		conn, ok := keepAlive(t, hostile, addr)
		if !ok {
			t.Fatalf("connection %d within the cap was refused", i+1)
		}
		held = append(held, conn)
	}
	for i := range 3 {
		if _, ok := keepAlive(t, hostile, addr); ok {
			t.Fatalf("connection %d over the cap was served", i+1)
		}
	}
	if _, ok := keepAlive(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, addr); !ok {
		t.Fatal("another address was refused while the hostile one was at its cap")
	}
	if s := lim.Stats(); s.Refused != 3 {
		t.Fatalf("refused %d connections, want 3", s.Refused)
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 1 {
		t.Errorf("%d log lines about the refused connections, want 1 (a line a client a minute):\n%s", n, logs)
	}
	held[0].Close()
	deadline := time.Now().Add(30 * time.Second)
	for lim.Stats().Open != perClient { // the other address's closed too
		if time.Now().After(deadline) {
			t.Fatalf("open connections %+v: the closed ones never gave their place back", lim.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := keepAlive(t, hostile, addr); !ok {
		t.Fatal("a place given back was not taken")
	}
}

// Over IPv6 the cap counts a /64: ::1 holds at most the cap.
func TestConnectionsOverTheCapOfAnIPv6AddressAreRefused(t *testing.T) {
	const perClient = 2
	lim, addr, _ := capServer(t, "tcp6", "[::1]:0", perClient)
	for i := range perClient {
		if _, ok := keepAlive(t, nil, addr); !ok {
			t.Fatalf("connection %d within the cap was refused", i+1)
		}
	}
	if _, ok := keepAlive(t, nil, addr); ok {
		t.Fatal("a connection over the cap of ::1's /64 was served")
	}
	if s := lim.Stats(); s.Refused != 1 || s.Clients != 1 {
		t.Fatalf("stats %+v, want 1 refused and 1 client", s)
	}
}
