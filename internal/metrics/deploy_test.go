package metrics_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/coordinator"
	"github.com/gitfleet/gitfleet/internal/fullnode"
	"github.com/gitfleet/gitfleet/internal/metrics"
	"github.com/gitfleet/gitfleet/internal/node"
)

// spy is a process's registry that remembers what was registered on it, so
// that a test can list every family, those with no sample yet included.
type spy struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (s *spy) Register(c prometheus.Collector) error {
	if err := s.Registry.Register(c); err != nil {
		return err
	}
	s.collectors = append(s.collectors, c)
	return nil
}

func (s *spy) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := s.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// families are the names of every family the registry can serve.
func (s *spy) families(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fams, err := s.Gather() // the runtime's and the process's collectors
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		out[f.GetName()] = true
	}
	ch := make(chan *prometheus.Desc, 100)
	go func() {
		for _, c := range s.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

// everyFamily builds the registries of a coordinator, a full node and a
// partial node in this process and returns the families they serve.
func everyFamily(t *testing.T) map[string]bool {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	all := map[string]bool{}
	for _, mode := range []string{"full", "partial"} {
		reg := &spy{Registry: metrics.NewRegistry()}
		// Not run: its families are registered by New. (Its store stays
		// open until the test process ends.)
		ncfg := node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), Metrics: reg}
		var err error
		if mode == "full" {
			_, err = fullnode.New(fullnode.Config{Config: ncfg}, log, clock.NewFake(time.Unix(1.7e9, 0)))
		} else {
			_, err = node.New(ncfg, log, clock.NewFake(time.Unix(1.7e9, 0)), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		for f := range reg.families(t) {
			all[f] = true
		}
	}
	reg := &spy{Registry: metrics.NewRegistry()}
	dir := t.TempDir()
	c, err := coordinator.New(context.Background(), coordinator.Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"),
		JoinToken: "j", Metrics: reg}, log, clock.NewFake(time.Unix(1.7e9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for f := range reg.families(t) {
		all[f] = true
	}
	return all
}

var seriesName = regexp.MustCompile(`\b(?:gitfleet|go|process)_[a-z0-9_]+`)

// unknown returns the series names in expr that no family serves (a
// histogram's _bucket, _sum and _count are its family's).
func unknown(expr string, families map[string]bool) []string {
	var out []string
	for _, name := range seriesName.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && families[b] {
				base = b
			}
		}
		if !families[base] {
			out = append(out, name)
		}
	}
	return out
}

func TestDashboardAndAlertRulesUseOnlyFamiliesThatExist(t *testing.T) {
	families := everyFamily(t)
	for _, must := range []string{"gitfleet_repos", "gitfleet_check_duration_seconds", "gitfleet_coordinator_leader", "go_goroutines"} {
		if !families[must] {
			t.Fatalf("the registries lack %s: the spy sees %d families", must, len(families))
		}
	}

	var dash struct {
		Title  string
		UID    string
		Panels []struct {
			Type    string
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile("../../deploy/grafana/gitfleet.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("deploy/grafana/gitfleet.json: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs++
			if bad := unknown(q.Expr, families); len(bad) > 0 {
				t.Errorf("dashboard panel %q uses %v, which no role serves", p.Title, bad)
			}
			if !seriesName.MatchString(q.Expr) {
				t.Errorf("dashboard panel %q: %q reads no gitfleet family", p.Title, q.Expr)
			}
		}
	}
	if dash.UID == "" || exprs < 20 {
		t.Errorf("dashboard %q (uid %q) has %d queries", dash.Title, dash.UID, exprs)
	}

	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	b, err = os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want an alert name, an expression, a severity and a summary", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if bad := unknown(r.Expr, families); len(bad) > 0 {
				t.Errorf("rule %s uses %v, which no role serves", r.Alert, bad)
			}
		}
	}
	// The alerts the brief asks for, by name.
	for _, want := range []string{"GitfleetNodeGone", "GitfleetFailingShare", "GitfleetStalenessAboveMaxInterval",
		"GitfleetFullNodeDiskAboveHighWater", "GitfleetPurgeHeld", "GitfleetForgedTips", "GitfleetNoLeader"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts.yml lacks %s (has %v)", want, alerts)
		}
	}
}

func TestUnknownSeesAMisspelledFamily(t *testing.T) {
	families := map[string]bool{"gitfleet_check_duration_seconds": true}
	if bad := unknown(`rate(gitfleet_check_duration_seconds_bucket[5m]) / gitfleet_check_duration_second_count`, families); !slices.Equal(bad, []string{"gitfleet_check_duration_second_count"}) {
		t.Fatalf("unknown = %v", bad)
	}
}
