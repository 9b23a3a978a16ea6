package gitcmd

import (
	"slices"
	"strings"
	"testing"
)

func TestObjectIDsGoBeforeTheDashesAndMustBeHex(t *testing.T) {
	id := strings.Repeat("ab", 20)
	args, err := (&Runner{}).argv(&Cmd{Name: "grep", Flags: []string{"-l", "-f-"}, ObjectIDs: []string{id}, Args: []string{"a.list"}})
	if err != nil {
		t.Fatal(err)
	}
	if tail := args[len(args)-5:]; !slices.Equal(tail, []string{"-l", "-f-", id, "--", "a.list"}) {
		t.Errorf("argv ends %q", tail)
	}
	for _, bad := range []string{"--output=/tmp/x", "HEAD", strings.Repeat("AB", 20), strings.Repeat("a", 39), ""} {
		if _, err := (&Runner{}).argv(&Cmd{Name: "grep", ObjectIDs: []string{bad}}); err == nil {
			t.Errorf("%q accepted as an object ID", bad)
		}
	}
}
