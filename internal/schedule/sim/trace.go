// Package sim replays traces of upstream changes against the freshness
// scheduler, with a fake clock, to measure how fresh each policy keeps the
// mirrors for a given budget, alone or beside a forge's change feed. It
// also generates synthetic traces and computes the theory's oracle (and,
// for a feed, the oracle and uniform sweeps at the feed's rate) to compare
// with.
//
// It owns trace parsing and generation, the forge's answers and the
// freshness accounting. It must not reimplement a policy or the feed's
// plan: they run through the same schedule.Scheduler and feedplan.Planner
// code the nodes run.
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

// Trace is the change history of a set of repositories.
type Trace struct {
	Repos []Repo // sorted by key
}

// Repo is one repository of a trace.
type Repo struct {
	Key     string
	Changes []time.Time // sorted; may be empty
}

// ReadTrace parses CSV lines `key,unix_seconds`, in any order. A line with
// an empty time declares a repository with no change. Blank lines are
// skipped.
func ReadTrace(r io.Reader) (*Trace, error) {
	byKey := make(map[string][]time.Time)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		key, ts, ok := strings.Cut(text, ",")
		key, ts = strings.TrimSpace(key), strings.TrimSpace(ts)
		switch {
		case !ok:
			return nil, fmt.Errorf("trace line %d: %q: want key,unix_seconds", line, text)
		case key == "":
			return nil, fmt.Errorf("trace line %d: empty key", line)
		case strings.Contains(ts, ","):
			return nil, fmt.Errorf("trace line %d: %q: too many fields", line, text)
		}
		changes := byKey[key]
		if ts != "" {
			sec, err := strconv.ParseInt(ts, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("trace line %d: time %q: %w", line, ts, err)
			}
			changes = append(changes, time.Unix(sec, 0).UTC())
		}
		byKey[key] = changes
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace line %d: %w", line+1, err)
	}
	return newTrace(byKey), nil
}

func newTrace(byKey map[string][]time.Time) *Trace {
	tr := &Trace{Repos: make([]Repo, 0, len(byKey))}
	for k, cs := range byKey {
		slices.SortFunc(cs, func(a, b time.Time) int { return a.Compare(b) })
		tr.Repos = append(tr.Repos, Repo{Key: k, Changes: cs})
	}
	slices.SortFunc(tr.Repos, func(a, b Repo) int { return strings.Compare(a.Key, b.Key) })
	return tr
}

// Span returns the first and the last change time of the trace (zero
// times if it has no change).
func (t *Trace) Span() (first, last time.Time) {
	for _, r := range t.Repos {
		if len(r.Changes) == 0 {
			continue
		}
		if f := r.Changes[0]; first.IsZero() || f.Before(first) {
			first = f
		}
		if l := r.Changes[len(r.Changes)-1]; l.After(last) {
			last = l
		}
	}
	return first, last
}
