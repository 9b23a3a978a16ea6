package api

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// BenchmarkGitHubWebhook measures one delivery of the real push payload:
// verify the signature, parse, find the repository, join its queued check.
func BenchmarkGitHubWebhook(b *testing.B) {
	body := readPayload(b, "github/push.json")
	backend := newFakeBackend("github.com/codertocat/hello-world")
	backend.starts = make(chan startCall, 1) // only the first delivery starts a check
	clk := clock.NewFake(epoch)
	srv := New(Config{WebhookSecrets: hookSecrets}, backend.fleet(), NewTasks(clk, 100), NewBroker(0, 0, slog.New(slog.DiscardHandler)), slog.New(slog.DiscardHandler), clk)
	defer srv.Close()
	sig := Sign(hookSecrets["github"], body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		req := httptest.NewRequest("POST", "/hooks/github", strings.NewReader(string(body)))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-Hub-Signature-256", sig)
		req.Header.Set("X-GitHub-Delivery", strconv.Itoa(i)) // each a new delivery, not a replay
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusAccepted {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/delivery")
}

// BenchmarkSSEFanout100 publishes events to 100 clients of the event
// stream over loopback HTTP; an op is one event received by all 100.
func BenchmarkSSEFanout100(b *testing.B) {
	const clients = 100
	const window = 64 // events in flight at most, below the subscriber buffer (256)
	clk := clock.NewFake(epoch)
	events := NewBroker(0, 0, slog.New(slog.DiscardHandler))
	srv := New(Config{}, newFakeBackend().fleet(), NewTasks(clk, 100), events, slog.New(slog.DiscardHandler), clk)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	received := make(chan int, clients*window)
	var ready, done sync.WaitGroup
	for range clients {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/v1/events", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ready.Done()
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Scan() // the opening comment: subscribed
			ready.Done()
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					received <- 1
				}
			}
		}()
	}
	ready.Wait()
	ev := refEvent("github.com/a/b", "refs/heads/main")
	b.ResetTimer()
	// Rounds of window events, each received by all before the next, keep
	// every client within its buffer (a client never gets more than was
	// published, so the total tells that each got all).
	got := 0
	for published := 0; published < b.N; {
		for range min(window, b.N-published) {
			events.Publish(ev)
			published++
		}
		for got < published*clients {
			got += <-received
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*clients)/b.Elapsed().Seconds(), "deliveries/s")
	cancel()
	done.Wait()
}
