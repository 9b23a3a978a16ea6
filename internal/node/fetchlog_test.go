package node

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

func TestRefChangesCountsEveryChangeAndNamesTheFirstOnes(t *testing.T) {
	before := gitcmd.Refs{Refs: map[string]string{"refs/heads/main": "a", "refs/heads/gone": "b", "refs/tags/v1": "c"}}
	after := gitcmd.Refs{Refs: map[string]string{"refs/heads/main": "d", "refs/heads/new": "e", "refs/tags/v1": "c"}}
	n, names := refChanges(before, after)
	if n != 3 || !slices.Equal(names, []string{"refs/heads/gone", "refs/heads/main", "refs/heads/new"}) {
		t.Errorf("%d changes %q", n, names)
	}
	many := gitcmd.Refs{Refs: map[string]string{}}
	for i := range 30 {
		many.Refs[fmt.Sprintf("refs/tags/t%02d", i)] = "x"
	}
	n, names = refChanges(gitcmd.Refs{}, many)
	if n != 30 || len(names) != fetchlog.MaxRefNames || names[0] != "refs/tags/t00" {
		t.Errorf("a clone of 30 refs: %d changes, names %q", n, names)
	}
}
