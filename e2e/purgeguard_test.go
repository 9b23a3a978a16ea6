package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/alert"
)

// webhookOn is a JSON webhook receiver listening on addr (an address of
// 127.0.0.0/8 other than the upstreams' 127.0.0.1, so that an egress
// policy can allow it and not them). It returns its URL and the alerts it
// received.
func webhookOn(t *testing.T, addr string) (string, func() []alert.WebhookBody) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []alert.WebhookBody
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b alert.WebhookBody
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := json.Unmarshal(body, &b); err == nil {
			mu.Lock()
			got = append(got, b)
			mu.Unlock()
		}
		fmt.Fprint(w, "{}")
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/gitfleet-alerts", func() []alert.WebhookBody {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// The careless operator of issue 33: `gitfleet up` mirrors seven
// upstreams on 127.0.0.1 under --allow-private-upstreams, and is restarted
// without it. Every catalog entry is now refused; each was placed, so
// purge protection holds them all: they stay served, the refusals are the
// catalog's problems (API, console), the held purge is on the API, the
// console and in the log, and its alert reaches the webhook. Confirming
// the purge, as an operator does, removes them.
func TestUpRestartedWithoutPrivateUpstreamsHoldsEveryRemoval(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	hookURL, alerts := webhookOn(t, "127.0.0.2:0")
	f := newFleet(t)
	repos := seq(0, 7)
	f.seed(repos, "7 repositories")
	data, grpc, tunnel := filepath.Join(t.TempDir(), "up"), freeAddr(t), freeAddr(t)
	args := func(extra ...string) []string {
		return append([]string{"up", "--data", data, "--catalog", f.catalog, "--http", f.http, "--grpc", grpc,
			"--tunnel", tunnel, "--join-token", f.token, "--api-token", apiToken, "--catalog-interval", "1s",
			"--max-interval", "2s", "--min-interval", "500ms", "--public-url", f.base,
			"--alert", hookURL, "--alert-interval", "500ms", "--egress-allow", "127.0.0.2/32"}, extra...)
	}
	first := start(t, "up", args("--allow-private-upstreams")...)
	eventually(t, 90*time.Second, "every repository served", func() error { return f.servedLikeUpstream(repos) })
	first.stop()

	strict := start(t, "up-strict", args()...)
	eventually(t, 30*time.Second, "the API answers", func() error { _, err := apiRepos(f.base); return err })
	// Each entry is refused, and so is the catalog's missing upstream
	// (also on 127.0.0.1): all were placed, all are held.
	held := f.catalogKeys(repos)
	slices.Sort(held)
	problems := 2 + len(held) // the two bad lines writeCatalog always has, and the refusals
	var st struct {
		Problems     int      `json:"problems"`
		ProblemLines []string `json:"problem_lines"`
		Pending      *struct {
			Keys []string `json:"keys"`
		} `json:"pending_purge"`
	}
	eventually(t, 60*time.Second, "the refusals shown as problems and their removal held", func() error {
		if code := call(t, "GET", f.base+"/api/v1/catalog", apiToken, nil, &st); code != 200 {
			return fmt.Errorf("catalog status %d", code)
		}
		if st.Problems != problems || st.Pending == nil || !slices.Equal(st.Pending.Keys, held) {
			return fmt.Errorf("problems %d (want %d), pending %+v (want %v)", st.Problems, problems, st.Pending, held)
		}
		return nil
	})
	if !slices.ContainsFunc(st.ProblemLines, func(l string) bool { return strings.Contains(l, "blocked destination") }) {
		t.Errorf("no problem line says the egress policy refuses an entry: %v", st.ProblemLines)
	}
	eventually(t, 60*time.Second, "the purge-held alert at the webhook", func() error {
		for _, a := range alerts() {
			if a.Rule == alert.RulePurgeHeld && a.Status == alert.Firing {
				if !strings.Contains(a.Summary, fmt.Sprintf("removal of %d repositories", len(held))) {
					return fmt.Errorf("alert summary %q", a.Summary)
				}
				return nil
			}
		}
		return fmt.Errorf("alerts so far: %+v", alerts())
	})
	_, page := send(t, "GET", f.base+"/-/catalog", apiToken, nil)
	if want := fmt.Sprintf("%d entries skipped as bad", problems); !strings.Contains(string(page), want) || !strings.Contains(string(page), `id="held"`) {
		t.Errorf("the console's catalog page says neither %q nor what is held:\n%s", want, page)
	}
	if n := strict.count("restart: repositories the current egress policy refuses are held"); n != 1 {
		t.Errorf("the log tells of the held removals %d times, want once", n)
	}
	if err := f.servedLikeUpstream(repos); err != nil {
		t.Fatalf("a held repository is no longer served: %v", err)
	}

	if code := call(t, "POST", f.base+"/api/v1/catalog/confirm-purge", apiToken, nil, nil); code != 200 {
		t.Fatalf("confirm: %d", code)
	}
	eventually(t, 60*time.Second, "the confirmed removals applied", func() error {
		for _, i := range repos {
			if _, err := lsRemote(f.base + "/" + f.key(i) + ".git"); err == nil {
				return fmt.Errorf("%s still served", f.key(i))
			}
		}
		if code := call(t, "GET", f.base+"/api/v1/catalog", apiToken, nil, &st); code != 200 || st.Pending != nil {
			return fmt.Errorf("catalog status %d, pending %+v", code, st.Pending)
		}
		return nil
	})
}
