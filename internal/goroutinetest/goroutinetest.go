// Package goroutinetest reads the goroutines of a test binary, so that a
// test can wait for a package's goroutines to park or to end, instead of
// sleeping. Only tests import it.
package goroutinetest

import (
	"runtime"
	"strings"
)

// Goroutine is one goroutine of the process, as runtime.Stack prints it.
type Goroutine struct {
	// State is what it waits for ("select", "chan receive", "IO wait"),
	// or "running"/"runnable" when it waits for nothing.
	State string
	// Stack is its whole entry in the dump, header included.
	Stack string
}

// Parked reports whether g waits for something to happen to it: a channel
// (a timer of the clock, a task's end, a request) or the network.
func (g Goroutine) Parked() bool {
	switch g.State {
	case "select", "select (no cases)", "chan receive", "chan send", "IO wait":
		return true
	}
	return false
}

// Runs reports whether g is in code of files under a directory whose slash
// path ends with dir (as "internal/api"), other than their tests.
func (g Goroutine) Runs(dir string) bool {
	dir = "/" + strings.Trim(dir, "/") + "/"
	for _, line := range strings.Split(g.Stack, "\n") {
		// A frame's file line: "\t/path/internal/api/server.go:123 +0x1f".
		file, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		if strings.Contains(file, dir) && !strings.HasSuffix(file, "_test.go") {
			return true
		}
	}
	return false
}

// Others returns every goroutine of the process but the caller's.
func Others() []Goroutine {
	own := make([]byte, 64)
	own = own[:runtime.Stack(own, false)]
	self, _, _ := strings.Cut(string(own), " [")
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var gs []Goroutine
	for _, g := range strings.Split(string(buf), "\n\n") {
		// "goroutine 7 [select, 2 minutes]:"
		id, state, _ := strings.Cut(g, " [")
		if id == self {
			continue
		}
		state, _, _ = strings.Cut(state, "]")
		state, _, _ = strings.Cut(state, ",")
		gs = append(gs, Goroutine{State: state, Stack: g})
	}
	return gs
}
