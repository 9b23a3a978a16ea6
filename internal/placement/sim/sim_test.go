package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func simulate(t *testing.T, o options, scenario string) []result {
	t.Helper()
	steps, err := parseScenario(strings.NewReader(scenario))
	if err != nil {
		t.Fatal(err)
	}
	var out []result
	if err := run(context.Background(), o, steps, func(r result) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(steps)+1 {
		t.Fatalf("%d results for %d steps and the initial placement", len(out), len(steps))
	}
	return out
}

func TestDefaultScenarioMeetsTheTargets(t *testing.T) {
	o := options{keys: 100_000, nodes: 50, seed: 1, cloneTime: 30 * time.Second, maxInFlight: 50}
	results := simulate(t, o, defaultScenario(o.nodes))
	byStep := map[string]result{}
	for _, r := range results {
		byStep[r.Step] = r
		if !r.Converged {
			t.Errorf("%s: not converged, %d moves pending", r.Step, r.Pending)
		}
		if r.MovedOverMin != nil && *r.MovedOverMin > 1.1 {
			t.Errorf("%s: moved %d keys, minimum %d: ratio %.3f above 1.1", r.Step, r.Moved, r.MinMoved, *r.MovedOverMin)
		}
		if r.MaxOverMean > 1.15 {
			t.Errorf("%s: max/mean load %.3f above 1.15", r.Step, r.MaxOverMean)
		}
		if r.PeakInFlight > r.Members*o.maxInFlight {
			t.Errorf("%s: %d clones in flight at the peak, more than %d per member", r.Step, r.PeakInFlight, o.maxInFlight)
		}
	}
	tests := []struct {
		step  string
		check func(r result) bool
		want  string
	}{
		{"crash node=3 for=5m", func(r result) bool { return r.Moved == 0 && r.PeakInFlight == 0 }, "a crash within grace moves nothing"},
		{"return node=3", func(r result) bool { return r.Moved == 0 && r.PeakInFlight == 0 }, "a return within grace moves nothing"},
		{"return node=2", func(r result) bool { return r.Moved > 0 && r.PeakInFlight == 0 && r.ConvergeSeconds == 0 },
			"a node back after grace gets its keys back from its own disk, without a clone"},
		{"crash node=2 for=15m", func(r result) bool { return r.Moved > 0 && r.ConvergeSeconds >= 600 },
			"a crashed node's keys move once its 10m grace is over"},
		{"join node=51", func(r result) bool { return r.Moved > 0 && r.PeakInFlight == o.maxInFlight },
			"a joining node gets its keys paced, MaxInFlight at a time"},
		{"flap node=4 times=4 every=2m", func(r result) bool { return r.Moved > 0 }, "a flapping node loses weight"},
		{"wait for=1h", func(r result) bool { return r.Moved > 0 }, "a stable node gets its weight back"},
		{"disk node=5 used=92%", func(r result) bool { return r.Moved > 0 }, "a full node hands keys back"},
		{"disk node=5 used=60%", func(r result) bool {
			return r.Moved == byStep["disk node=5 used=92%"].Moved && r.PeakInFlight <= o.maxInFlight
		}, "the keys return, paced, when the disk has room"},
	}
	for _, tt := range tests {
		r, ok := byStep[tt.step]
		if !ok {
			t.Errorf("no result for step %q", tt.step)
			continue
		}
		if !tt.check(r) {
			t.Errorf("%s: %+v: want: %s", tt.step, r, tt.want)
		}
	}
}

func TestPacingHoldsForAHeavyJoin(t *testing.T) {
	o := options{keys: 20_000, nodes: 10, seed: 7, cloneTime: 10 * time.Second, maxInFlight: 5}
	r := simulate(t, o, "join node=11 weight=4\n")[1]
	if r.PeakInFlight != 5 {
		t.Errorf("peak in flight %d during the join of one node, want MaxInFlight (5)", r.PeakInFlight)
	}
	if !r.Converged || r.Moved < 5000 {
		t.Errorf("join: %+v: want the heavy node to get its share (about 2/7 of the keys)", r)
	}
}

func TestJSONOutputParses(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--keys", "3000", "--nodes", "8", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d, stderr %s", code, stderr.String())
	}
	lines := 0
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		lines++
		var obj map[string]any
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", lines, err, sc.Text())
		}
		for _, field := range []string{"step", "moved", "min_moved", "max_over_mean", "in_flight"} {
			if _, ok := obj[field]; !ok {
				t.Errorf("line %d lacks %q: %s", lines, field, sc.Text())
			}
		}
	}
	if want := strings.Count(defaultScenario(8), "\n"); lines != want { // the steps and the initial placement
		t.Errorf("%d lines, want %d", lines, want)
	}
}

func TestSameSeedGivesTheSameReport(t *testing.T) {
	runMain := func() string {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), []string{"--keys", "3000", "--nodes", "6", "--seed", "42"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit code %d: %s", code, stderr.String())
		}
		return stdout.String()
	}
	if a, b := runMain(), runMain(); a != b {
		t.Errorf("two runs with the same seed differ:\n%s\n%s", a, b)
	}
}

func TestMainRefusesBadArguments(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.txt", "crash node=99\n")
	badLine := write("bad.txt", "join node=9\nexplode node=1\n")
	twice := write("twice.txt", "crash node=2\ncrash node=2\n")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no keys", []string{"--keys", "0"}, 2, "--keys 0"},
		{"too few nodes for the default scenario", []string{"--nodes", "3"}, 2, "--nodes 5 or more"},
		{"an argument", []string{"extra"}, 2, "unexpected arguments"},
		{"an unknown flag", []string{"--speed", "3"}, 2, "speed"},
		{"a missing scenario", []string{"--scenario", filepath.Join(dir, "none")}, 2, "opening the scenario"},
		{"a bad scenario line", []string{"--scenario", badLine}, 2, "line 2"},
		{"a step on an unknown node", []string{"--keys", "100", "--nodes", "5", "--scenario", unknown}, 1, "node 99 is not in the fleet"},
		{"a crash of a node that is down", []string{"--keys", "100", "--nodes", "5", "--scenario", twice}, 1, "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit code %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.stderr)
			}
		})
	}

	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage:") {
		t.Errorf("--help: exit code %d, stdout %q", code, stdout.String())
	}
}

func TestParseScenario(t *testing.T) {
	tests := []struct {
		line string
		want step
		err  string
	}{
		{line: "join node=7", want: step{verb: verbJoin, node: 7, weight: 1}},
		{line: "join node=7 weight=2.5 for=1h", want: step{verb: verbJoin, node: 7, weight: 2.5, hold: time.Hour}},
		{line: "leave   node=3  # gone", want: step{verb: verbLeave, node: 3, weight: 1}},
		{line: "crash node=2 for=1d", want: step{verb: verbCrash, node: 2, weight: 1, hold: 24 * time.Hour}},
		{line: "flap node=4", want: step{verb: verbFlap, node: 4, weight: 1, times: 4, every: 2 * time.Minute}},
		{line: "flap node=4 times=6 every=30s", want: step{verb: verbFlap, node: 4, weight: 1, times: 6, every: 30 * time.Second}},
		{line: "disk node=5 used=92%", want: step{verb: verbDisk, node: 5, weight: 1, used: 0.92}},
		{line: "wait for=90s", want: step{verb: verbWait, weight: 1, hold: 90 * time.Second}},
		{line: "explode node=1", err: "unknown step"},
		{line: "join", err: "needs node="},
		{line: "join node=0", err: "start at 1"},
		{line: "join node=x", err: "node=x"},
		{line: "join node=1 node=2", err: "twice"},
		{line: "join node=1 weight=0", err: "weight"},
		{line: "leave node=1 weight=2", err: "leave takes no weight="},
		{line: "disk node=1", err: "needs used="},
		{line: "disk node=1 used=120%", err: "percentage"},
		{line: "wait for=-1h", err: "duration"},
		{line: "wait for=400d", err: "duration"},
		{line: "crash node=1 soon", err: "name=value"},
		{line: "flap node=1 every=1s", err: "at least 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			steps, err := parseScenario(strings.NewReader("# a comment\n\n" + tt.line + "\n"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "line 3") {
					t.Errorf("error %v, want one about line 3 with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := steps[0]
			if got.line != 3 || got.name == "" {
				t.Errorf("line %d name %q", got.line, got.name)
			}
			got.line, got.name = 0, ""
			want := tt.want
			if want.times == 0 {
				want.times, want.every = 4, 2*time.Minute
			}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
	if _, err := parseScenario(strings.NewReader("# only comments\n")); err == nil {
		t.Error("a scenario without steps was accepted")
	}
}

func FuzzParseScenario(f *testing.F) {
	f.Add(defaultScenario(50))
	f.Add("join node=7 weight=2.5 for=1h\nflap node=1 times=3 every=30s\n")
	f.Add("disk node=1 used=99.5%\nwait for=1.5d\n")
	f.Fuzz(func(t *testing.T, text string) {
		steps, err := parseScenario(strings.NewReader(text))
		if err != nil {
			return
		}
		for _, st := range steps {
			if _, ok := verbArgs[st.verb]; !ok {
				t.Errorf("step with unknown verb %q accepted", st.verb)
			}
			if st.hold < 0 || st.hold > maxStepTime || st.used < 0 || st.used > 1 {
				t.Errorf("step out of range accepted: %+v", st)
			}
		}
	})
}
