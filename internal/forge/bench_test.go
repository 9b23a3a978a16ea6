package forge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// benchServerEnv makes TestBenchFeedServer serve (in a child process of
// the benchmark, so that the benchmark's CPU is the client's alone).
const benchServerEnv = "GITFLEET_FORGE_BENCH_SERVER"

// BenchmarkGitHubSweep measures the feed's own cost of one sweep of n
// repositories (n/100 GraphQL queries, each answer turned into push times
// by key) against a GitHub-like server in a child process on 127.0.0.1:
// requests and bytes on the wire an hour at one sweep every two hours,
// and the client's CPU a sweep.
func BenchmarkGitHubSweep(b *testing.B) {
	api := startBenchServer(b)
	for _, n := range benchsize.Of([]int{10_000, 100_000, 1_000_000}, []int{1000}) {
		b.Run(fmt.Sprintf("repos=%d", n), func(b *testing.B) {
			paths := make([]string, n)
			for i := range paths {
				paths[i] = fmt.Sprintf("owner-%d/repo-%d", i%1000, i)
			}
			var wire atomic.Int64
			dial := &net.Dialer{}
			hc := &http.Client{Transport: &http.Transport{
				MaxIdleConnsPerHost: 1,
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := dial.DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return &countingConn{Conn: c, n: &wire}, nil
				},
			}}
			c, err := New(Forge{Host: "github.com", Kind: GitHub, API: api}, []Token{NewToken("test-token-1")}, Options{HTTPClient: hc})
			if err != nil {
				b.Fatal(err)
			}
			l := c.(Lookup)
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				keys := 0
				for i := 0; i < n; i += l.BatchSize() {
					a, err := l.PushedAt(ctx, paths[i:min(i+l.BatchSize(), n)])
					if err != nil {
						b.Fatal(err)
					}
					times, _ := PushTimes(repokey.Folding{}, "github.com", a)
					keys += len(times)
				}
				if keys != n {
					b.Fatalf("%d push times for %d repositories", keys, n)
				}
			}
			b.StopTimer()
			cpu := (cpuTime(b) - cpu0) / time.Duration(b.N)
			requests := float64(n) / float64(l.BatchSize())
			b.ReportMetric(requests/2, "requests/h")
			b.ReportMetric(float64(wire.Load())/float64(b.N)/2/1e6, "MB/h")
			b.ReportMetric(float64(wire.Load())/float64(b.N)/float64(n), "bytes/repo")
			b.ReportMetric(cpu.Seconds(), "cpu-s/sweep")
		})
	}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// cpuTime is the process's user and system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startBenchServer runs TestBenchFeedServer in a child process and
// returns its API base.
func startBenchServer(b *testing.B) *url.URL {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchFeedServer$", "-test.v")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close() // the server stops when its stdin closes
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			u, err := url.Parse("http://" + addr)
			if err != nil {
				b.Fatal(err)
			}
			return u
		}
	}
	b.Fatal("the benchmark's feed server did not start")
	return nil
}

// TestBenchFeedServer is BenchmarkGitHubSweep's server, in a process of
// its own: it answers GitHub GraphQL queries of repositories named
// owner-(i%1000)/repo-i with GitHub's headers, cheaply (it reads the
// first index and the number of lookups, and writes the answer by hand).
// It does nothing unless the benchmark starts it.
func TestBenchFeedServer(t *testing.T) {
	if os.Getenv(benchServerEnv) == "" {
		t.Skip("run by BenchmarkGitHubSweep")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pushed := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC).Format(time.RFC3339)
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	var remaining atomic.Int64
	remaining.Store(1 << 40)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		lookups := bytes.Count(body, []byte(": repository("))
		first := -1
		if _, rest, ok := bytes.Cut(body, []byte(`"n0":"repo-`)); ok {
			end := bytes.IndexByte(rest, '"')
			if end > 0 {
				first, _ = strconv.Atoi(string(rest[:end]))
			}
		}
		if lookups == 0 || first < 0 {
			http.Error(w, `{"message":"Problems parsing JSON"}`, http.StatusBadRequest)
			return
		}
		left := remaining.Add(-1)
		h := w.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(left, 10))
		h.Set("X-RateLimit-Reset", reset)
		h.Set("X-RateLimit-Used", "1")
		h.Set("X-RateLimit-Resource", "graphql")
		out := make([]byte, 0, 128+lookups*96)
		out = append(out, `{"data":{"rateLimit":{"cost":1,"remaining":`...)
		out = strconv.AppendInt(out, left, 10)
		out = append(out, `,"resetAt":"2026-11-27T12:00:00Z","limit":5000}`...)
		for j := range lookups {
			i := first + j
			out = append(out, `,"r`...)
			out = strconv.AppendInt(out, int64(j), 10)
			out = append(out, `":{"pushedAt":"`...)
			out = append(out, pushed...)
			out = append(out, `","nameWithOwner":"owner-`...)
			out = strconv.AppendInt(out, int64(i%1000), 10)
			out = append(out, `/repo-`...)
			out = strconv.AppendInt(out, int64(i), 10)
			out = append(out, `"}`...)
		}
		out = append(out, "}}"...)
		_, _ = w.Write(out)
	})}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("listening on %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}
