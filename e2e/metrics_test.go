package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads url's Prometheus exposition with the reference parser.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: not the Prometheus text format: %w", url, err)
	}
	return fams, nil
}

// sample is the sum of family's samples whose labels include want (a
// histogram's count), and whether any matched.
func sample(fams map[string]*dto.MetricFamily, family string, want ...string) (float64, bool) {
	f := fams[family]
	if f == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			ok = ok && labels[want[i]] == want[i+1]
		}
		if !ok {
			continue
		}
		found = true
		switch {
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, found
}

// documentedFamilies are the families the Metrics section of
// docs/metrics.md lists, and those of them marked as appearing only once
// what they count happens.
func documentedFamilies(t *testing.T) (all []string, onEvent map[string]bool) {
	t.Helper()
	f, err := os.Open("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	item := regexp.MustCompile("^- `([a-z_]+)`")
	onEvent = map[string]bool{}
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.TrimLeft(line, "# ") == "Metrics"
			continue
		}
		if m := item.FindStringSubmatch(line); in && m != nil {
			all = append(all, m[1])
			if strings.Contains(line, "(once it happens)") {
				onEvent[m[1]] = true
			}
		}
	}
	if len(all) < 20 {
		t.Fatalf("docs/metrics.md's Metrics section lists %d families: want each family, one a line", len(all))
	}
	return all, onEvent
}

// TestMetricsOnEveryRole scrapes a coordinator and a partial node on their
// --metrics addresses and a full node on its HTTP port, after they cloned
// and fetched real repositories, and checks every family docs/metrics.md names
// and the values that this fleet must show.
func TestMetricsOnEveryRole(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 4)
	f.seed(repos, "4 repositories") // and a missing upstream, and two bad lines
	coordMetrics, partialMetrics := freeAddr(t), freeAddr(t)
	args := append([]string{"coordinator", "--data", f.dataDir("coordinator"), "--catalog", f.catalog, "--grpc", f.grpc,
		"--warmup", "1s", "--warmup-nodes", "2", "--catalog-interval", "1s", "--full-token", f.fullToken,
		"--metrics", coordMetrics}, f.common()...)
	f.procs["coordinator"] = start(t, "coordinator", args...)
	f.tunnelAddr = freeAddr(t)
	// The full node fetches nothing itself (--capacity 0): every repository
	// is the partial node's, cloned and fetched there and pulled through its
	// tunnel.
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--capacity", "0")
	f.startNode("partial", "partial", "--metrics", partialMetrics)

	eventually(t, 90*time.Second, "the repositories served with the upstream's refs", func() error {
		return f.servedLikeUpstream(repos)
	})
	// A new commit on every upstream: the partial node fetches it and the
	// full node pulls it.
	for _, i := range repos {
		if _, err := f.up.Commit(f.name(i), "main"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, "the new commits served", func() error { return f.servedLikeUpstream(repos) })

	type check struct {
		what   string
		family string
		labels []string
		ok     func(v float64) bool
	}
	positive := func(v float64) bool { return v > 0 }
	is := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
	checks := map[string][]check{
		"http://" + coordMetrics + "/metrics": {
			{"leads", "gitfleet_coordinator_leader", nil, is(1)},
			{"partial session", "gitfleet_coordinator_sessions", []string{"mode", "partial"}, is(1)},
			{"full session", "gitfleet_coordinator_sessions", []string{"mode", "full"}, is(1)},
			{"nodes alive", "gitfleet_coordinator_nodes", []string{"state", "alive"}, is(2)},
			{"repositories placed (4 and a missing one)", "gitfleet_coordinator_repos", nil, is(5)},
			{"placing", "gitfleet_coordinator_placing", nil, is(1)},
			{"assignments", "gitfleet_placement_decisions_total", []string{"kind", "assign"}, func(v float64) bool { return v >= 5 }},
			{"bad catalog lines", "gitfleet_coordinator_catalog_problems", nil, is(2)},
			{"catalog refreshes", "gitfleet_coordinator_catalog_refreshes_total", []string{"result", "ok"}, positive},
			{"store writes", "gitfleet_store_write_duration_seconds", []string{"role", "coordinator", "backend", "bolt"}, positive},
			{"goroutines", "go_goroutines", nil, positive},
			{"resident memory", "process_resident_memory_bytes", nil, positive},
		},
		"http://" + partialMetrics + "/metrics": {
			{"clones", "gitfleet_check_duration_seconds", []string{"role", "partial", "kind", "clone", "result", "ok"}, func(v float64) bool { return v >= 4 }},
			{"fetches", "gitfleet_check_duration_seconds", []string{"role", "partial", "kind", "fetch", "result", "ok"}, func(v float64) bool { return v >= 4 }},
			{"the missing upstream", "gitfleet_upstream_errors_total", []string{"class", "deleted", "host", "127.0.0.1"}, positive},
			{"session", "gitfleet_node_session", nil, is(1)},
			{"tunnel to the full node", "gitfleet_node_tunnels_open", nil, is(1)},
			{"repositories owned", "gitfleet_scheduler_repos", nil, is(5)},
			{"bytes from upstreams", "gitfleet_fetched_bytes_total", []string{"source", "upstream"}, positive},
			{"bytes served to the full node", "gitfleet_served_bytes_total", []string{"to", "full-node"}, positive},
			{"checks counted", "gitfleet_scheduler_checks_total", nil, positive},
			{"staleness at rechecks", "gitfleet_check_interval_seconds", nil, positive},
			{"max interval", "gitfleet_scheduler_max_interval_seconds", nil, is(3)},
			{"store writes", "gitfleet_store_write_duration_seconds", []string{"role", "node"}, positive},
		},
		f.base + "/metrics": {
			{"tunnels", "gitfleet_tunnels", nil, is(1)},
			{"repositories", "gitfleet_repos_total", nil, is(5)},
			{"current", "gitfleet_repos_current", nil, func(v float64) bool { return v >= 4 }},
			{"nodes alive", "gitfleet_nodes", []string{"state", "alive"}, is(2)},
			{"purge pending", "gitfleet_catalog_purge_pending", nil, is(0)},
			{"bad catalog lines", "gitfleet_catalog_problems", nil, is(2)},
			{"first pulls", "gitfleet_pull_duration_seconds", []string{"kind", "clone", "result", "ok"}, func(v float64) bool { return v >= 4 }},
			{"pulls of the new commits", "gitfleet_pull_duration_seconds", []string{"kind", "fetch", "result", "ok"}, func(v float64) bool { return v >= 4 }},
			{"bytes from owners", "gitfleet_fetched_bytes_total", []string{"source", "owner"}, positive},
			{"bytes served to the public", "gitfleet_served_bytes_total", []string{"to", "public"}, positive},
			{"disk measured", "gitfleet_full_disk_total_bytes", nil, positive},
		},
	}
	all := map[string]*dto.MetricFamily{}
	eventually(t, 60*time.Second, "every role's figures", func() error {
		var bad []string
		for url, cs := range checks {
			fams, err := scrape(url)
			if err != nil {
				return err
			}
			for name, fam := range fams {
				if all[name] == nil {
					all[name] = fam
				}
			}
			for _, c := range cs {
				v, found := sample(fams, c.family, c.labels...)
				if !found || !c.ok(v) {
					bad = append(bad, fmt.Sprintf("%s: %s%v = %v (found %v)", url, c.family, c.labels, v, found))
				}
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("%s", strings.Join(bad, "\n"))
		}
		return nil
	})
	families, onEvent := documentedFamilies(t)
	for _, name := range families {
		if all[name] == nil && !onEvent[name] {
			t.Errorf("docs/metrics.md lists %s, which no role serves", name)
		}
	}
}
