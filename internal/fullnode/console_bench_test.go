package fullnode

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
)

// BenchmarkConsole times the console's pages at a million repositories
// (fake states, as BenchmarkFullNodeRequests), through the full node's
// real HTTP handlers: the overview, a search for a rare substring (a scan
// of every key), for a common one (stops at the first page), and the
// failing repositories:
//
//	go test ./internal/fullnode/ -run '^$' -bench '^BenchmarkConsole$' -benchtime 20x -count=1
func BenchmarkConsole(b *testing.B) {
	n := benchsize.Of(1_000_000, 1000)
	f := benchFullNode(b, n)
	h := f.publicHandler()
	for _, path := range []string{"/", "/-/repos?q=repo999999", "/-/repos?q=example", "/-/repos?state=failing"} {
		get := func(b *testing.B) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			if w.Code != http.StatusOK {
				b.Fatalf("%s: %d %s", path, w.Code, w.Body)
			}
		}
		get(b) // the first listing or search after the view filled builds its index once
		b.Run(fmt.Sprintf("repos=%d,GET %s", n, path), func(b *testing.B) {
			for b.Loop() {
				get(b)
			}
		})
	}
}
