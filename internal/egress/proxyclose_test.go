package egress

import (
	"log/slog"
	"testing"
)

// The node's shutdown waits for everything the proxy started: Close
// returns once the goroutine accepting connections has.
func TestProxyCloseWaitsForItsServingGoroutine(t *testing.T) {
	p, err := NewProxy(&Dialer{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.served:
	default:
		t.Fatal("Close returned while the proxy's Serve still ran")
	}
}
