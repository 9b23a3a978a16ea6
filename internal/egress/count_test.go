package egress_test

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gitfleet/gitfleet/internal/egress"
)

// TestReceivedCountsWhatUpstreamsSendThroughTheProxy: a node counts the
// bytes git receives from upstreams (gitfleet_fetched_bytes_total) on the
// connections its dialer makes, over CONNECT (https) and forwarded http.
func TestReceivedCountsWhatUpstreamsSendThroughTheProxy(t *testing.T) {
	const size = 100_000
	body := strings.Repeat("x", size)
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewTLSServer(handler)
	defer secure.Close()

	pol, err := egress.New(egress.Config{Allow: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	var received atomic.Int64
	d := &egress.Dialer{Policy: pol, Received: func(n int) { received.Add(int64(n)) }}
	proxy, err := egress.NewProxy(d, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	env, end := proxy.Begin()
	defer end()
	pool := secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL(t, env)),
		TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()

	for _, url := range []string{plain.URL, secure.URL} {
		before := received.Load()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s through the proxy: %v", url, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(got) != size {
			t.Fatalf("GET %s: %d bytes, want %d", url, len(got), size)
		}
		// The body and the answer's headers (and TLS records): at least the
		// body, and not many times it.
		if n := received.Load() - before; n < size || n > 2*size {
			t.Errorf("GET %s: %d bytes counted for a %d-byte body", url, n, size)
		}
	}
}
