package metrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gitfleet/gitfleet/internal/store"
)

func TestHostsKeepTheFirstHostsByNameAndTheRestAsOther(t *testing.T) {
	h := NewHosts(2)
	for _, c := range []struct{ url, want string }{
		{"https://GitHub.com/a/b.git", "github.com"},
		{"https://github.com:443/c/d", "github.com"},
		{"git@gitlab.com:a/b.git", "gitlab.com"},
		{"https://gitee.com/a/b", OtherHost}, // a third host
		{"https://github.com/e/f", "github.com"},
		{"not a url", OtherHost},
		{"", OtherHost},
	} {
		if got := h.Label(c.url); got != c.want {
			t.Errorf("Label(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

func TestRegisterReturnsTheCollectorAlreadyThere(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := StoreWrites(reg)
	b := StoreWrites(reg) // as the coordinator and the full node of `up` do
	if a != b {
		t.Fatal("a second StoreWrites on one registry made a second histogram")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering another collector under a family's name with other labels did not panic")
		}
	}()
	Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gitfleet_store_write_duration_seconds", Help: "x"}, []string{"other"}))
}

func TestCountBytesCountsTheBodyAndKeepsTheWriterReachable(t *testing.T) {
	var n int
	h := CountBytes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// gitserve sets deadlines and flushes through http.ResponseController:
		// both need the server's own writer behind the wrapper.
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "0008NAK\n")
		if err := rc.Flush(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, strings.Repeat("x", 1000))
	}), func(k int) { n += k })
	srv := httptest.NewServer(h) // on 127.0.0.1, its listener held
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", resp.Status, body)
	}
	if n != 1008 || len(body) != 1008 {
		t.Fatalf("counted %d bytes of a %d-byte answer, want 1008", n, len(body))
	}
}

// A file copied to the wrapped writer reaches net/http's ReadFrom (which
// sends it with sendfile) and is counted.
func TestCountBytesPassesACopiedFileToTheServersReadFrom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pack")
	if err := os.WriteFile(path, bytes.Repeat([]byte("p"), 100000), 0o600); err != nil {
		t.Fatal(err)
	}
	var n int
	var readFrom bool
	h := CountBytes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readFrom = w.(io.ReaderFrom)
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Length", "100000")
		_, _ = io.Copy(w, io.LimitReader(f, 100000))
	}), func(k int) { n += k })
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !readFrom {
		t.Error("the counting writer hides the server's ReadFrom")
	}
	if n != 100000 || len(body) != 100000 {
		t.Fatalf("counted %d bytes of a %d-byte answer, want 100000", n, len(body))
	}
}

func TestTimedStoreObservesEachWriteAndNoRead(t *testing.T) {
	bolt, err := store.OpenBolt(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := StoreWrites(reg)
	s := TimeStore(bolt, h, "node", "bolt")
	defer s.Close()
	ctx := context.Background()
	for i := range 3 {
		if err := s.Put(ctx, "b", fmt.Sprint(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "b", "0"); err != nil {
		t.Fatal(err)
	}
	if err := s.Batch(ctx, []store.Op{{Bucket: "b", Key: "x", Value: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "b", "1"); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"put": 3, "delete": 1, "batch": 1}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					got[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("%s: %d observations, want %d (all: %v)", op, got[op], n, got)
		}
	}
	if c := testutil.CollectAndCount(h); c != 3 {
		t.Errorf("%d series, want 3 (put, delete, batch: reads are not timed)", c)
	}
}

func TestServeAnswersAtMetricsUntilTheContextEnds(t *testing.T) {
	reg := NewRegistry()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // held: no other process can take it
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, reg, slog.New(slog.DiscardHandler)) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines ") || !strings.Contains(string(body), "process_cpu_seconds_total ") {
		t.Fatalf("%s:\n%.500s", resp.Status, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after its context ended: %v", err)
	}
}
