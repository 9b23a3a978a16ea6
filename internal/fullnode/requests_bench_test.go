package fullnode

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/tunnel"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// benchFullNode is a full node whose view holds n repositories (fake
// states, no git, no coordinator): a tenth failing, the rest ok or pending,
// each held with the owner's digest.
func benchFullNode(tb testing.TB, n int) *Node {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: tb.TempDir(), Fetchers: 1}},
		log, clock.NewFake(time.Unix(1e9, 0)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.n.TestHooks().Close)
	f.tunnels = tunnel.NewServer(f.creds.authenticate, log, nil)
	self := f.n.ID()
	const batch = 10_000
	rs := make([]*fleetv1.RepoState, 0, batch)
	held := make(map[repokey.Key]string, batch)
	for i := range n {
		k := fmt.Sprintf("host%d.example/group%d/repo%d", i%7, i%100, i)
		st := "ok"
		switch {
		case i%10 == 3:
			st = "failing"
		case i%10 == 7:
			st = "pending"
		}
		d := fmt.Sprintf("d%d", i)
		held[repokey.Key(k)] = d
		rs = append(rs, &fleetv1.RepoState{Key: k, Url: "https://" + k, Owner: self, State: st, Digest: d, LastCheckMs: 1e12})
		if len(rs) == batch || i == n-1 {
			f.n.TestHooks().Hold(held)
			clear(held)
			f.states(rs)
			for _, r := range rs {
				forceVerified(f, r.GetKey(), 1e12) // as the last check
			}
			f.reclass(stateKeys(rs)...)
			rs = make([]*fleetv1.RepoState, 0, batch)
		}
	}
	return f
}

// forceVerified sets key's verified_at to ms (unix ms; 0: never), back in
// time too, as the full node's own setVerified never does, without a
// reclass and without the store: a test's past.
func forceVerified(f *Node, key string, ms int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.view.SetVerified(repokey.Key(key), unixSeconds(msTime0(ms)))
	if ok {
		f.stale.Move(int64(old)*1000, int64(unixSeconds(msTime0(ms)))*1000)
	}
}

func stateKeys(rs []*fleetv1.RepoState) []repokey.Key {
	keys := make([]repokey.Key, len(rs))
	for i, r := range rs {
		keys[i] = repokey.Key(r.GetKey())
	}
	return keys
}

// BenchmarkFullNodeRequests times the public requests that used to walk
// every repository, through the full node's real HTTP handlers:
//
//	go test ./internal/fullnode/ -run '^$' -bench '^BenchmarkFullNodeRequests$' -benchtime 20x -count=1
func BenchmarkFullNodeRequests(b *testing.B) {
	for _, n := range benchsize.Of([]int{100_000, 1_000_000}, []int{1000}) {
		f := benchFullNode(b, n)
		h := f.publicHandler()
		get := func(b *testing.B, path string) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			if w.Code != http.StatusOK {
				b.Fatalf("%s: %d %s", path, w.Code, w.Body)
			}
		}
		for _, path := range []string{"/metrics", "/api/v1/repos?state=failing&limit=50", "/api/v1/repos?limit=50"} {
			get(b, path) // the first listing after the view filled merges its index once
			b.Run(fmt.Sprintf("repos=%d,GET %s", n, path), func(b *testing.B) {
				for b.Loop() {
					get(b, path)
				}
			})
		}
		// /metrics as Prometheus asks for it: protobuf (or text), gzipped.
		b.Run(fmt.Sprintf("repos=%d,GET /metrics as Prometheus scrapes", n), func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				r.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3")
				r.Header.Set("Accept-Encoding", "gzip")
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK || w.Header().Get("Content-Encoding") != "gzip" {
					b.Fatalf("/metrics: %d, encoding %q", w.Code, w.Header().Get("Content-Encoding"))
				}
			}
		})
		// As in a running fleet: 100 repositories change state between two
		// requests, and the request merges them into its index.
		flip := 0
		b.Run(fmt.Sprintf("repos=%d,GET /api/v1/repos?state=failing&limit=50 after 100 changes", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				rs := make([]*fleetv1.RepoState, 0, 100)
				for range 100 {
					j := (flip*7919 + 3) % n
					flip++
					k := fmt.Sprintf("host%d.example/group%d/repo%d", j%7, j%100, j)
					st := "failing"
					if f.view.Get(repokey.Key(k)).GetState() == "failing" {
						st = "ok"
					}
					rs = append(rs, &fleetv1.RepoState{Key: k, Url: "https://" + k, State: st, Digest: fmt.Sprintf("d%d", j), LastCheckMs: 1e12})
				}
				f.states(rs)
				b.StartTimer()
				get(b, "/api/v1/repos?state=failing&limit=50")
			}
		})
	}
}
