package mirror

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestPruneCandidates(t *testing.T) {
	t.Parallel()
	before := map[string]string{"refs/heads/main": "a", "refs/heads/dev": "b", "refs/tags/v1": "t"}
	cases := []struct {
		name  string
		after map[string]string
		sure  bool
		moved int
	}{
		{"unchanged", before, false, 0},
		{"new refs", map[string]string{"refs/heads/main": "a", "refs/heads/dev": "b", "refs/tags/v1": "t", "refs/heads/x": "c"}, false, 0},
		{"moved branches", map[string]string{"refs/heads/main": "c", "refs/heads/dev": "d", "refs/tags/v1": "t"}, false, 2},
		{"deleted branch", map[string]string{"refs/heads/main": "a", "refs/tags/v1": "t"}, true, 0},
		{"moved tag", map[string]string{"refs/heads/main": "a", "refs/heads/dev": "b", "refs/tags/v1": "u"}, true, 0},
	}
	for _, c := range cases {
		sure, moved := pruneCandidates(before, c.after)
		if sure != c.sure || len(moved) != c.moved {
			t.Errorf("%s: sure %v, %d moved; want %v, %d", c.name, sure, len(moved), c.sure, c.moved)
		}
	}
	many, manyAfter := map[string]string{}, map[string]string{}
	for i := range maxAncestryChecks + 1 {
		ref := "refs/heads/b" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		many[ref], manyAfter[ref] = "old", "new"
	}
	if sure, _ := pruneCandidates(many, manyAfter); !sure {
		t.Error("more moved branches than the ancestry checks allowed did not mark at once")
	}
}

func TestNextPrune(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	if _, ok, _ := nextPrune(nil, now); ok {
		t.Fatal("nothing marked, yet something to prune")
	}
	due := map[repokey.Key]time.Time{"b": now.Add(-time.Second), "a": now.Add(-time.Second), "c": now.Add(time.Minute)}
	if k, ok, _ := nextPrune(due, now); !ok || k != "a" {
		t.Fatalf("next = %q %v, want a", k, ok)
	}
	delete(due, "a")
	delete(due, "b")
	if _, ok, wait := nextPrune(due, now); ok || wait != time.Minute {
		t.Fatalf("next = %v after %v, want a wait of 1m", ok, wait)
	}
	if got := pruneDue(now, time.Hour); !got.Equal(now.Add(time.Hour)) {
		t.Fatalf("due = %v", got)
	}
}
