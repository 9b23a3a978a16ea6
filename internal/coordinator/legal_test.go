package coordinator

import (
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// An upstream that is gone is told apart by its answer: 451 is legal at
// the first answer, HTTP 404 or 410 deleted once said GoneAfter times in
// a row, another "not found" gone; each with the time it was first seen,
// which later answers of the same kind leave alone. A flapping server's
// 404s between good answers make nothing gone.
func TestAGoneUpstreamShowsItsReasonAndWhenItWasFirstSeen(t *testing.T) {
	const (
		legal    = "legal: The requested URL returned error: 451"
		deleted  = "deleted: fatal: repository 'https://example.org/a/b/' not found"
		notFound = "not-found: ERROR: Repository not found."
		ok       = "ok"
	)
	for _, tc := range []struct {
		name    string
		answers []string
		want    repostate.State
		sinceAt int // the answer whose time is the state's since (from 1, after the clone)
	}{
		{"451 once", []string{legal}, repostate.Legal, 1},
		{"451 again keeps its first sight", []string{legal, legal, legal}, repostate.Legal, 1},
		{"404 four times", []string{deleted, deleted, deleted, deleted}, repostate.Failing, 1},
		{"404 five times", []string{deleted, deleted, deleted, deleted, deleted, deleted}, repostate.Deleted, 5},
		{"ssh not found five times", []string{notFound, notFound, notFound, notFound, notFound}, repostate.Gone, 5},
		{"a flapping 404", []string{deleted, deleted, deleted, deleted, ok, deleted, deleted, deleted, deleted}, repostate.Failing, 6},
		{"back after deleted", []string{deleted, deleted, deleted, deleted, deleted, ok}, repostate.OK, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
			full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
			node := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "volunteer", Capacity: 1})
			const key = "example.org/a/b"
			if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key}); err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			connect(c, node)
			c.placing = true
			c.setMembers()
			c.decide()
			id := node.GetNodeId()
			c.result(id, &fleetv1.CheckResult{Key: key, Ok: true, Cloned: true, CheckedAtMs: 1000})
			if owner, _ := c.owner(key); owner != id {
				t.Fatalf("owner %d, want %d", owner, id)
			}
			for i, a := range tc.answers {
				at := int64(1000 * (i + 2))
				if a == ok {
					c.result(id, &fleetv1.CheckResult{Key: key, Ok: true, CheckedAtMs: at})
					continue
				}
				word, text, _ := strings.Cut(a, ": ")
				class := repostate.ClassNotFound
				if word == "legal" {
					class = repostate.ClassLegal
				}
				c.result(id, &fleetv1.CheckResult{Key: key, ErrorClass: word, Class: uint32(class), Error: text, CheckedAtMs: at})
			}
			st := c.status[key]
			if st.state != tc.want {
				t.Errorf("state %q, want %q", st.state, tc.want)
			}
			if want := int64(1000 * (tc.sinceAt + 1)); st.since != want {
				t.Errorf("since %d, want %d (answer %d)", st.since, want, tc.sinceAt)
			}
		})
	}
}
