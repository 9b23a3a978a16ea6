package coordinator

import (
	"fmt"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A full node's bulk of states (its session's start, a whole catalog) is
// sent once each, in batches, after the states that changed meanwhile; a
// key removed before its turn is not sent; the list is let go at the end.
func TestASweepSendsEveryStateOnceAfterTheChanges(t *testing.T) {
	c := newTestCoordinator(t, t.TempDir(), testJoin, testFull)
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	var keys []string
	for i := range 1234 {
		key := fmt.Sprintf("example.org/g/r%04d", i)
		if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := newSession(c, c.nodes[full.GetNodeId()], func() {})
	s.queueSweep(keySeq(keys))
	s.queueState(repokey.Key(keys[1000])) // changed meanwhile: goes first
	gone := keys[700]
	c.overlay[repokey.Key(gone)] = overlay{Removed: true}
	var batches [][]string
	for range 100 {
		var got []string
		for _, m := range s.next() {
			for _, r := range m.GetRepoStates().GetRepos() {
				got = append(got, r.GetKey())
			}
		}
		if len(got) == 0 {
			break
		}
		batches = append(batches, got)
	}
	if len(batches) < 3 || batches[0][0] != keys[1000] {
		t.Fatalf("batches %d, the first begins with %v: want the changed key first", len(batches), batches[0][:1])
	}
	seen := map[string]int{}
	for _, b := range batches {
		if len(b) > c.cfg.BatchSize {
			t.Fatalf("a batch of %d states, over %d", len(b), c.cfg.BatchSize)
		}
		for _, k := range b {
			seen[k]++
		}
	}
	for _, k := range keys {
		want := 1
		if k == keys[1000] {
			want = 2 // once changed, once in the bulk
		}
		if k == gone {
			want = 0
		}
		if seen[k] != want {
			t.Errorf("%s sent %d times, want %d", k, seen[k], want)
		}
	}
	if s.sweep != nil {
		t.Error("the bulk list is kept after it was sent")
	}

	// A churn of a whole batch of changes at every send still lets the
	// sweep go on; a second sweep replaces the first, which it covers.
	s.queueSweep(keySeq(keys))
	s.queueSweep(keySeq(keys))
	if len(s.sweep) != len(keys) {
		t.Fatalf("two sweeps queued %d keys, want %d", len(s.sweep), len(keys))
	}
	swept := 0
	for range 100 {
		for _, k := range keys[:c.cfg.BatchSize] {
			s.queueState(repokey.Key(k))
		}
		before := s.sweepAt
		s.next()
		if s.sweep == nil {
			swept = len(keys)
			break
		}
		swept += s.sweepAt - before
		if s.sweepAt == before {
			t.Fatal("a churn of changed states stopped the sweep")
		}
	}
	if swept != len(keys) {
		t.Fatalf("the sweep sent %d of %d keys under churn", swept, len(keys))
	}
}

// keySeq yields keys as Keys.
func keySeq(keys []string) func(func(repokey.Key) bool) {
	return func(yield func(repokey.Key) bool) {
		for _, k := range keys {
			if !yield(repokey.Key(k)) {
				return
			}
		}
	}
}
