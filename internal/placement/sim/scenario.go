package sim

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Verbs of a scenario step.
const (
	verbJoin   = "join"
	verbLeave  = "leave"
	verbCrash  = "crash"
	verbReturn = "return"
	verbFlap   = "flap"
	verbDisk   = "disk"
	verbWait   = "wait"
)

// step is one line of a scenario.
type step struct {
	name   string // the line as written, without its comment
	line   int
	verb   string
	node   uint32
	weight float64       // join
	hold   time.Duration // for=: the least simulated time the step lasts
	times  int           // flap
	every  time.Duration // flap
	used   float64       // disk: share of the disk in use
}

// args each verb takes (besides for=, which every verb takes).
var verbArgs = map[string][]string{
	verbJoin:   {"node", "weight"},
	verbLeave:  {"node"},
	verbCrash:  {"node"},
	verbReturn: {"node"},
	verbFlap:   {"node", "times", "every"},
	verbDisk:   {"node", "used"},
	verbWait:   nil,
}

// parseScenario reads a scenario: one step per line, '#' starts a comment.
func parseScenario(r io.Reader) ([]step, error) {
	var steps []step
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.Join(strings.Fields(text), " ")
		if text == "" {
			continue
		}
		st, err := parseStep(text)
		if err != nil {
			return nil, fmt.Errorf("scenario line %d: %w", n, err)
		}
		st.line = n
		steps = append(steps, st)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the scenario: %w", err)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("the scenario has no steps")
	}
	return steps, nil
}

func parseStep(text string) (step, error) {
	fields := strings.Fields(text)
	st := step{name: text, verb: fields[0], weight: 1, times: 4, every: 2 * time.Minute}
	allowed, ok := verbArgs[st.verb]
	if !ok {
		return st, fmt.Errorf("unknown step %q: want join, leave, crash, return, flap, disk or wait", st.verb)
	}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		name, value, ok := strings.Cut(f, "=")
		if !ok || value == "" {
			return st, fmt.Errorf("%q: want name=value", f)
		}
		if seen[name] {
			return st, fmt.Errorf("%s= given twice", name)
		}
		seen[name] = true
		var err error
		switch {
		case name == "for":
			st.hold, err = parseDuration(value)
		case !slices.Contains(allowed, name):
			err = fmt.Errorf("%s takes no %s=", st.verb, name)
		case name == "node":
			var id uint64
			id, err = strconv.ParseUint(value, 10, 32)
			if err == nil && id == 0 {
				err = fmt.Errorf("node IDs start at 1")
			}
			st.node = uint32(id)
		case name == "weight":
			st.weight, err = strconv.ParseFloat(value, 64)
			if err == nil && !(st.weight > 0 && st.weight <= 100) {
				err = fmt.Errorf("weight %s: want a number in (0, 100]", value)
			}
		case name == "times":
			st.times, err = strconv.Atoi(value)
			if err == nil && (st.times < 1 || st.times > 100) {
				err = fmt.Errorf("times %s: want 1 to 100", value)
			}
		case name == "every":
			st.every, err = parseDuration(value)
			if err == nil && st.every < 2*time.Second {
				err = fmt.Errorf("every %s: want at least 2s", value)
			}
		case name == "used":
			pct, perr := strconv.ParseFloat(strings.TrimSuffix(value, "%"), 64)
			err = perr
			if err == nil && !(pct >= 0 && pct <= 100) {
				err = fmt.Errorf("used %s: want a percentage from 0 to 100", value)
			}
			st.used = pct / 100
		}
		if err != nil {
			return st, fmt.Errorf("%s=%s: %w", name, value, err)
		}
	}
	if allowed != nil && !seen["node"] {
		return st, fmt.Errorf("%s needs node=", st.verb)
	}
	if st.verb == verbDisk && !seen["used"] {
		return st, fmt.Errorf("disk needs used=")
	}
	return st, nil
}

// parseDuration accepts Go durations and days ("2d").
func parseDuration(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil {
			return 0, err
		}
		d = time.Duration(n * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, err
		}
	}
	if d < 0 || d > maxStepTime {
		return 0, fmt.Errorf("want a duration from 0 to %v", maxStepTime)
	}
	return d, nil
}

// defaultScenario has a step of every kind for a fleet of nodes 1..n (n >= 5).
func defaultScenario(n int) string {
	steps := [][2]string{
		{fmt.Sprintf("join node=%d", n+1), "a new node: it takes its share, paced"},
		{"leave node=1", "removed for good: its keys go to the others at once"},
		{"crash node=2 for=15m", "past the 10m grace: its keys are re-placed, urgent"},
		{"crash node=3 for=5m", "a reboot..."},
		{"return node=3", "...back within grace: nothing moves"},
		{"return node=2", "back after grace with its disk: its keys return, no clone"},
		{"flap node=4 times=4 every=2m", "4 downs in an hour: lower weight, longer grace"},
		{"wait for=1h", "stable again: the penalty ends"},
		{"disk node=5 used=92%", "above the high mark: hands keys back"},
		{"disk node=5 used=60%", "room again: the keys return, paced"},
	}
	var b strings.Builder
	b.WriteString("# the default scenario of gitfleet sim placement\n")
	for _, st := range steps {
		fmt.Fprintf(&b, "%-30s # %s\n", st[0], st[1])
	}
	return b.String()
}
