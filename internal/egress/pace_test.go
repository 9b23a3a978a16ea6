package egress_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/bandwidth"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/egress"
)

// TestLimitPacesWhatUpstreamsSendThroughTheProxy: with a volunteer's cap
// of 2 MiB/s on the dialer, 3 MiB from an upstream take the time the cap
// implies for the bytes counted, and not 20% more. The cap's clock is a
// fake one that moves only while a connection waits for the bucket: the
// time measured on it is the cap's schedule, which a busy machine does not
// stretch.
func TestLimitPacesWhatUpstreamsSendThroughTheProxy(t *testing.T) {
	const size, rate = 3 << 20, 2 << 20
	body := make([]byte, size)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer upstream.Close()
	pol, err := egress.New(egress.Config{Allow: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	defer clk.StartDriving(time.Millisecond)()
	var received atomic.Int64
	d := &egress.Dialer{Policy: pol, Received: func(n int) { received.Add(int64(n)) }, Limit: bandwidth.NewLimiterOn(rate, clk)}
	proxy, err := egress.NewProxy(d, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	env, end := proxy.Begin()
	defer end()
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL(t, env))}}
	defer client.CloseIdleConnections()

	start := clk.Now()
	resp, err := client.Get(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := clk.Now().Sub(start)
	if err != nil || n != size {
		t.Fatalf("read %d bytes of %d: %v", n, size, err)
	}
	moved := float64(received.Load())
	// The bucket holds at most its burst when the fetch starts.
	least := time.Duration((moved - float64(d.Limit.Burst())) / rate * float64(time.Second))
	ratio := took.Seconds() / (moved / rate)
	t.Logf("%.0f bytes from the upstream in %v at 2MiB/s: %.3f of the time the cap implies", moved, took, ratio)
	if took < least || ratio >= 1.2 {
		t.Fatalf("%.0f bytes took %v: want at least %v, and a ratio under 1.2 (%.3f)", moved, took, least, ratio)
	}
}
