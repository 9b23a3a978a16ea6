package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCLIPrintsOneJSONObjectPerPolicy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "trace.csv")
	var b strings.Builder
	for i := 0; i < 50; i++ {
		b.WriteString("example.org/a," + itoa(1700000000+i*3600) + "\n")
		b.WriteString("example.org/b," + itoa(1700000000+i*7200) + "\n")
	}
	b.WriteString("example.org/c,\n")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--trace", p, "--budget", "3", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("want 5 policies, got %d lines:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"policy", "freshness", "age_seconds", "checks"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("%s lacks %s", l, k)
			}
		}
		if f := r["freshness"].(float64); f <= 0 || f > 1 {
			t.Fatalf("freshness %v out of range", f)
		}
	}
}

func TestCLIWithAFeedPrintsItsPoliciesAndBaselines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "trace.csv")
	var b strings.Builder
	for i := 0; i < 50; i++ {
		b.WriteString("example.org/a," + itoa(1700000000+i*3600) + "\n")
	}
	b.WriteString("example.org/b,\n")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	args := []string{"--trace", p, "--budget", "1", "--feed-budget", "2", "--feed-batch", "1", "--policy", "adaptive,adaptive+feed,feed-optimal,feed-uniform", "--json"}
	if code := Main(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var policies []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		policies = append(policies, r["policy"].(string))
		if r["policy"] == "adaptive+feed" && r["feed_asks"].(float64) == 0 {
			t.Errorf("adaptive+feed asked about nothing: %s", l)
		}
	}
	if got := strings.Join(policies, " "); got != "adaptive adaptive+feed feed-optimal feed-uniform" {
		t.Errorf("policies %s", got)
	}
	// One policy named, with a feed: it runs as P and as P+feed, as the
	// help says of every policy.
	out.Reset()
	args = []string{"--trace", p, "--budget", "1", "--feed-budget", "2", "--feed-batch", "1", "--policy", "adaptive", "--json"}
	if code := Main(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if got := strings.Count(out.String(), `"policy":"adaptive"`) + strings.Count(out.String(), `"policy":"adaptive+feed"`); got != 2 ||
		strings.Count(out.String(), "\n") != 2 {
		t.Errorf("--policy adaptive with a feed printed %q, want adaptive and adaptive+feed", out.String())
	}
	if code := Main(context.Background(), []string{"--trace", p, "--budget", "1", "--feed-batch", "0"}, &out, &errOut); code != 2 {
		t.Errorf("exit %d for --feed-batch 0, want 2", code)
	}
}

func TestCLIWithFeedHostsShowsTheUnfedRepositoriesApart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "trace.csv")
	var b strings.Builder
	for i := 0; i < 50; i++ {
		b.WriteString("github.com/a," + itoa(1700000000+i*3600) + "\n")
		b.WriteString("example.org/b," + itoa(1700000000+i*7200) + "\n")
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	args := []string{"--trace", p, "--budget", "1", "--feed-budget", "2", "--feed-batch", "1", "--feed-hosts", "github.com",
		"--fed-max-interval", "336h", "--policy", "adaptive+feed,adaptive+fed", "--json"}
	if code := Main(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per policy: %s", len(lines), out.String())
	}
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r["unfed_repositories"] != 1.0 || r["unfed_stale_share"] == nil {
			t.Errorf("want one unfed repository and its stale share: %s", l)
		}
	}
	out.Reset()
	if code := Main(context.Background(), args[:len(args)-1], &out, &errOut); code != 0 || !strings.Contains(out.String(), "unfed stale") {
		t.Errorf("exit %d, table without an unfed stale column:\n%s", code, out.String())
	}
}

func TestCLIRefusesMissingArguments(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--budget", "3"}, &out, &errOut); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if code := Main(context.Background(), []string{"--trace", "/nonexistent", "--budget", "3"}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d for a missing file", code)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
