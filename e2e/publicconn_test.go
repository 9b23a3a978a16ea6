package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// heldConn dials the public server from local, makes one request and
// keeps the connection; ok is false when the server closed it unanswered.
func heldConn(t *testing.T, local, addr string) (conn net.Conn, ok bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: mirror\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return conn, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return conn, resp.StatusCode == http.StatusOK
}

// A client that holds keep-alive connections to the public server (issue
// 33, item 4): beyond --serve-max-conns-per-client its new ones are closed
// unanswered while another address is served, and those it holds are
// closed once idle for --serve-idle-conn-timeout.
func TestAnAddressOverItsConnectionCapIsRefusedAndIdleConnectionsAreClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	f.seed([]int{0}, "one repository")
	f.startUp("--serve-max-conns-per-client", "3", "--serve-idle-conn-timeout", "2s")
	other := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	eventually(t, 90*time.Second, "the public server answers", func() error {
		resp, err := other.Get(f.base + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	var held []net.Conn
	for i := range 3 {
		conn, ok := heldConn(t, "127.0.0.1", f.http)
		if !ok {
			t.Fatalf("connection %d within the cap was refused", i+1)
		}
		held = append(held, conn)
	}
	if _, ok := heldConn(t, "127.0.0.1", f.http); ok {
		t.Fatal("a fourth connection from one address was served over a cap of 3")
	}
	resp, err := other.Get(f.base + "/healthz")
	if err != nil {
		t.Fatalf("another address, while the first held its cap: %v", err)
	}
	resp.Body.Close()
	for i, conn := range held {
		// The server closes an idle connection: a read sees its end,
		// long before the test's own deadline.
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		_, err := conn.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("held connection %d still open after a minute idle (timeout 2s)", i+1)
		}
		if err == nil {
			t.Fatalf("held connection %d: the server sent data on an idle connection", i+1)
		}
	}
	eventually(t, 30*time.Second, "the refused connection counted", func() error {
		fams, err := scrape(f.base + "/metrics")
		if err != nil {
			return err
		}
		if v, _ := sample(fams, "gitfleet_serve_conns_refused_total"); v != 1 {
			return fmt.Errorf("gitfleet_serve_conns_refused_total %v, want 1", v)
		}
		return nil
	})
}
