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
