package tunnel

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/bandwidth"
	"github.com/gitfleet/gitfleet/internal/clock"
)

// TestAVolunteersCapPacesWhatTheNodeSendsThroughTheTunnel: a full node's
// pull of 3 MiB from a node capped at 2 MiB/s takes the time the cap
// implies, and not 20% more. The cap's clock is a fake one that moves
// only while the tunnel waits for the bucket: the time measured on it is
// the cap's schedule, which a busy machine does not stretch.
func TestAVolunteersCapPacesWhatTheNodeSendsThroughTheTunnel(t *testing.T) {
	const size, rate = 3 << 20, 2 << 20
	body := randomBytes(size, 3)
	srv, addr, _ := startServer(t, "127.0.0.1:0", nil)
	clk := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	defer clk.StartDriving(time.Millisecond)()
	limiter := bandwidth.NewLimiterOn(rate, clk)
	startClient(t, ClientConfig{Addr: addr, Upload: limiter}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write(body)
	}))
	waitFor(t, "node 7 is connected", func() bool { return srv.Connected(testNode) })
	proxy := httptest.NewServer(srv.ReverseProxy())
	defer proxy.Close()

	start := clk.Now()
	resp, err := http.Get(proxy.URL + "/7/github.com/a/b.git/info/refs")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := clk.Now().Sub(start)
	if err != nil || n != size {
		t.Fatalf("read %d bytes of %d: %v", n, size, err)
	}
	// The bucket holds at most its burst when the pull starts; the
	// headers are sent through it too.
	least := time.Duration(float64(size-limiter.Burst()) / rate * float64(time.Second))
	ratio := took.Seconds() / (float64(size) / rate)
	t.Logf("%d bytes through the tunnel in %v at %s: %.3f of the time the cap implies", n, took, limiter.Rate(), ratio)
	if took < least || ratio >= 1.2 {
		t.Fatalf("%d bytes took %v at %s: want at least %v and under 1.2 times %v", n, took, limiter.Rate(), least,
			time.Duration(float64(size)/rate*float64(time.Second)))
	}
}
