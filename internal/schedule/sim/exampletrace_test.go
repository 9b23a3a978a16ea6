package sim

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write the example trace in examples/traces anew")

// The example trace that the documentation's `gitfleet sim schedule`
// commands run on from a clone: a synthetic trace, generated here.
var exampleTrace = struct {
	path       string
	kind       string
	n, days    int
	seed       int64
	budget     string // one check per repository per day, in checks an hour
	feedBudget string // an hourly budget of requests of 1 repository: every repository every 2 hours
}{filepath.Join("..", "..", "..", "examples", "traces", "bursty-12r-60d.csv"), KindBursty, 12, 60, 1, "0.5", "6"}

// formatTrace writes a trace in the format ReadTrace reads: key,unix_seconds
// a change, and key, for a repository with none.
func formatTrace(tr *Trace) []byte {
	var b bytes.Buffer
	for _, r := range tr.Repos {
		if len(r.Changes) == 0 {
			fmt.Fprintf(&b, "%s,\n", r.Key)
		}
		for _, c := range r.Changes {
			fmt.Fprintf(&b, "%s,%d\n", r.Key, c.Unix())
		}
	}
	return b.Bytes()
}

// The shipped example trace is exactly the generator's output for its
// parameters (go test ./internal/schedule/sim -run ExampleTrace -update
// writes it again), and reads back as that trace.
func TestTheExampleTraceIsTheGeneratorsOutput(t *testing.T) {
	e := exampleTrace
	want := formatTrace(Generate(e.kind, e.n, e.days, e.seed))
	if *update {
		if err := os.MkdirAll(filepath.Dir(e.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(e.path)
	if err != nil {
		t.Fatalf("%v (go test -run ExampleTrace -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not Generate(%q, %d, %d, %d): write it again with -update", e.path, e.kind, e.n, e.days, e.seed)
	}
	tr, err := ReadTrace(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Repos) != e.n {
		t.Fatalf("%s holds %d repositories, want %d", e.path, len(tr.Repos), e.n)
	}
}

// The documentation's commands run on the example trace: every policy,
// then every policy beside a forge's feed.
func TestTheSimulatorRunsOnTheExampleTrace(t *testing.T) {
	e := exampleTrace
	for _, args := range [][]string{
		{"--trace", e.path, "--budget", e.budget},
		{"--trace", e.path, "--budget", e.budget, "--feed-budget", e.feedBudget, "--feed-batch", "1"},
	} {
		var out, errOut bytes.Buffer
		if code := Main(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("gitfleet sim schedule %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		for _, policy := range []string{"adaptive", "fixed", "compass", "sourcegraph", "optimal"} {
			if !strings.Contains(out.String(), policy) {
				t.Errorf("gitfleet sim schedule %s: no line for %s:\n%s", strings.Join(args, " "), policy, out.String())
			}
		}
	}
}
