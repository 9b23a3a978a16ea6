package gitserve

import (
	"fmt"
	"strings"
	"testing"
)

// A step of a fairQueue table test. A waiter is named by its client's
// letter and a number ("a1"), and "@x" names the repository of its run
// ("a1@x").
type fairStep struct {
	op   string // push, take, first, remove
	arg  string // push, remove: a waiter; first: a client; take: a repository that does not fit ("": all fit)
	size int64  // push: the bytes the waiter holds
	want string // push: "ok", "refused" or the waiter bumped; take, first: the waiter ("": none); remove: "yes" or "no"
}

func TestFairQueue(t *testing.T) {
	push := func(w, want string) fairStep { return fairStep{op: "push", arg: w, want: want} }
	pushSized := func(w string, size int64, want string) fairStep {
		return fairStep{op: "push", arg: w, size: size, want: want}
	}
	take := func(want string) fairStep { return fairStep{op: "take", want: want} }
	takeNot := func(repo, want string) fairStep { return fairStep{op: "take", arg: repo, want: want} }
	first := func(client, want string) fairStep { return fairStep{op: "first", arg: client, want: want} }
	remove := func(w, want string) fairStep { return fairStep{op: "remove", arg: w, want: want} }
	for _, tc := range []struct {
		name     string
		maxLen   int
		maxBytes int64
		steps    []fairStep
	}{
		{"a client's line is first in, first out", 10, 0, []fairStep{
			push("a1", "ok"), push("a2", "ok"), push("a3", "ok"),
			first("a", "a1"), first("a", "a2"), first("b", ""), first("a", "a3"), first("a", ""),
		}},
		{"clients are taken in turn: one client's many do not starve another's one", 10, 0, []fairStep{
			push("a1", "ok"), push("a2", "ok"), push("a3", "ok"), push("b1", "ok"),
			take("a1"), take("b1"), take("a2"), take("a3"), take(""),
		}},
		{"a client that comes takes its turn after those already waiting", 10, 0, []fairStep{
			push("a1", "ok"), push("a2", "ok"), push("b1", "ok"),
			take("a1"), push("c1", "ok"), take("b1"), take("a2"), take("c1"), take(""),
		}},
		{"a run that does not fit is passed over for the next that fits", 10, 0, []fairStep{
			push("a1@x", "ok"), push("a2@y", "ok"), push("b1@x", "ok"),
			takeNot("x", "a2@y"), takeNot("x", ""), take("b1@x"), take("a1@x"), take(""),
		}},
		{"in a full queue the longest line gives up its newest to a client with fewer", 3, 0, []fairStep{
			push("a1", "ok"), push("a2", "ok"), push("a3", "ok"),
			push("b1", "a3"),      // a has 3, b none: a's newest goes
			push("b2", "refused"), // a has 2, b 1: as fair as it gets
			push("a4", "refused"), // a client does not bump its own
			first("a", "a1"), first("a", "a2"), first("a", ""), first("b", "b1"), first("b", ""),
		}},
		{"a client's waiting bodies are bounded in bytes", 10, 100, []fairStep{
			pushSized("a1", 60, "ok"), pushSized("a2", 50, "refused"), pushSized("b1", 100, "ok"),
			pushSized("b2", 1, "refused"), pushSized("c1", 101, "refused"), push("a3", "ok"),
			first("a", "a1"), pushSized("a2", 50, "ok"), first("a", "a3"), first("a", "a2"),
		}},
		{"a waiter that gives up leaves its place to the next", 10, 0, []fairStep{
			push("a1", "ok"), push("a2", "ok"), push("b1", "ok"),
			remove("a1", "yes"), remove("a1", "no"), remove("c1", "no"),
			take("a2"), remove("b1", "yes"), take(""),
		}},
		{"with no room nothing waits", 0, 0, []fairStep{
			push("a1", "refused"), take(""), first("a", ""),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &fairQueue{maxLen: tc.maxLen, maxBytes: tc.maxBytes}
			byName := map[string]*waiter{}
			name := func(w *waiter) string {
				for n, x := range byName {
					if x == w {
						return n
					}
				}
				return ""
			}
			for i, s := range tc.steps {
				var got string
				switch s.op {
				case "push":
					_, repo, _ := strings.Cut(s.arg, "@")
					w := &waiter{client: s.arg[:1], repo: repo, size: s.size}
					byName[s.arg] = w
					bumped, ok := q.push(w)
					switch {
					case !ok:
						got = "refused"
					case bumped != nil:
						got = name(bumped)
					default:
						got = "ok"
					}
				case "take":
					got = name(q.take(func(w *waiter) bool { return s.arg == "" || w.repo != s.arg }))
				case "first":
					got = name(q.first(s.arg))
				case "remove":
					got = "no"
					if w := byName[s.arg]; w != nil && q.remove(w) {
						got = "yes"
					}
				}
				if got != s.want {
					t.Fatalf("step %d, %s %s: got %q, want %q", i, s.op, s.arg, got, s.want)
				}
				if err := q.check(); err != nil {
					t.Fatalf("after step %d, %s %s: %v", i, s.op, s.arg, err)
				}
			}
		})
	}
}

// check verifies the queue's own bookkeeping: the count, the bytes, and a
// ring of exactly the clients with a line.
func (q *fairQueue) check() error {
	n := 0
	for c, l := range q.lines {
		if len(l.waiting) == 0 {
			return fmt.Errorf("client %s has an empty line", c)
		}
		var bytes int64
		for _, w := range l.waiting {
			bytes += w.size
		}
		if bytes != l.bytes {
			return fmt.Errorf("client %s: %d bytes counted, %d held", c, l.bytes, bytes)
		}
		n += len(l.waiting)
	}
	if n != q.n {
		return fmt.Errorf("%d waiting counted, %d in the lines", q.n, n)
	}
	if len(q.ring) != len(q.lines) {
		return fmt.Errorf("ring %v for %d lines", q.ring, len(q.lines))
	}
	for _, c := range q.ring {
		if q.lines[c] == nil {
			return fmt.Errorf("ring %v names %s, which has no line", q.ring, c)
		}
	}
	if len(q.ring) > 0 && (q.next < 0 || q.next >= len(q.ring)) {
		return fmt.Errorf("next %d out of the ring %v", q.next, q.ring)
	}
	return nil
}
