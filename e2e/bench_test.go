package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
)

// percentile returns the p-th percentile (0-100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

// BenchmarkPushToEvent measures, over 100 pushes (5 to 2 under -short) followed by
// their GitHub webhook, the time until the new commit is servable by the
// full node and announced on /api/v1/events. Run it with -benchtime=1x.
func BenchmarkPushToEvent(b *testing.B) {
	repos := seq(0, benchsize.Of(10, 2))
	f := apiFleet(b, repos)
	ev := subscribe(b, f.base)
	var lat []time.Duration
	// A bound against a hang, not the measurement: under -short, on CI's
	// busy machine, a push may take longer.
	bound := benchsize.Of(30*time.Second, 2*time.Minute)
	for n := 0; n < b.N; n++ {
		for i := range benchsize.Of(100, 5) {
			r := repos[i%len(repos)]
			newID, err := f.up.Commit(f.name(r), "main")
			if err != nil {
				b.Fatal(err)
			}
			url := f.up.RepoURL(f.name(r))
			body := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","after":"%s","repository":{"clone_url":"%s"}}`, newID, url))
			m := hmac.New(sha256.New, []byte(webhookSecret))
			m.Write(body)
			req, _ := http.NewRequest("POST", f.base+"/hooks/github", bytes.NewReader(body))
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			key := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), ".git")
			for ev.find(key, "refs/heads/main", newID) != nil {
				if time.Since(start) > bound {
					b.Fatalf("push %d not announced within %v", i, bound)
				}
				time.Sleep(5 * time.Millisecond)
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.ReportMetric(float64(percentile(lat, 50).Milliseconds()), "p50_ms")
	b.ReportMetric(float64(percentile(lat, 95).Milliseconds()), "p95_ms")
	b.ReportMetric(float64(slices.Max(lat).Milliseconds()), "max_ms")
}

// BenchmarkOnDemandFetchUnchanged measures an on-demand fetch (?wait) of a
// repository whose upstream did not move: the owner lists the upstream's
// refs, finds nothing new, and the task is done.
func BenchmarkOnDemandFetchUnchanged(b *testing.B) {
	repos := seq(0, benchsize.Of(4, 2))
	f := apiFleet(b, repos)
	var lat []time.Duration
	for n := 0; n < b.N; n++ {
		for i := range benchsize.Of(50, 5) {
			start := time.Now()
			var tk task
			if code := call(b, "POST", f.base+"/api/v1/repos/"+f.key(repos[i%len(repos)])+"/fetch?wait=30s", apiToken, nil, &tk); code != 200 || tk.State != "done" {
				b.Fatalf("fetch: %d %+v", code, tk)
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.ReportMetric(float64(percentile(lat, 50).Milliseconds()), "p50_ms")
	b.ReportMetric(float64(percentile(lat, 95).Milliseconds()), "p95_ms")
}
