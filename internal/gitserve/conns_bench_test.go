package gitserve_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitserve"
)

// BenchmarkHeldIdleConnections opens 4,000 keep-alive connections from one
// address to an HTTP server, one request on each, and reports what the
// process holds for them once they sit idle: the server's open
// connections, the process's file descriptors and its heap and stacks
// (the clients' side included, the same in both cases). "unbounded" is
// the public server before issue 33 (no idle timeout, no cap); "cap-64"
// under a ConnLimit of 64, the default of --serve-max-conns-per-client.
func BenchmarkHeldIdleConnections(b *testing.B) {
	const conns = 4000
	for _, perClient := range []int{0, 64} {
		name := "unbounded"
		if perClient > 0 {
			name = fmt.Sprintf("cap-%d", perClient)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				heldIdle(b, conns, perClient)
			}
		})
	}
}

func heldIdle(b *testing.B, conns, perClient int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	lim := &gitserve.ConnLimit{PerClient: perClient}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lim.Listen(ln)) }()
	defer srv.Close()
	before := memory()
	fdsBefore := fds()
	var held []net.Conn
	buf := make([]byte, 512)
	for range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(buf); err != nil {
			c.Close() // refused: the server closed it
			continue
		}
		held = append(held, c)
	}
	// The refused ones are closed on both ends before the count.
	for deadline := time.Now().Add(10 * time.Second); lim.Stats().Open > len(held) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	after := memory()
	b.ReportMetric(float64(lim.Stats().Open), "server-conns")
	b.ReportMetric(float64(fds()-fdsBefore), "fds")
	b.ReportMetric(float64(after-before)/(1<<20), "MB")
	for _, c := range held {
		c.Close()
	}
}

// memory is the heap in use and the goroutine stacks, after a collection.
func memory() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// fds counts the process's open file descriptors (0 without /proc).
func fds() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// BenchmarkConnLimitCost is the cap's cost where it is dearest: every
// request on a new connection (dial, one request, close), from one
// address, through a plain listener and through a ConnLimit of 64.
func BenchmarkConnLimitCost(b *testing.B) {
	for _, capped := range []bool{false, true} {
		name := "plain"
		if capped {
			name = "cap-64"
		}
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			if capped {
				ln = (&gitserve.ConnLimit{PerClient: 64}).Listen(ln)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			url := "http://" + ln.Addr().String() + "/"
			for b.Loop() {
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
