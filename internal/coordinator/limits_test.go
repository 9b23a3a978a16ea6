package coordinator

import (
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// A check over a limit is shown as its own state, named after the node's
// error class, and the state survives a restart (it is stored by name).
func TestLimitClassesHaveTheirOwnStates(t *testing.T) {
	for class, name := range map[gitcmd.Class]string{gitcmd.ClassTooLarge: "too-large", gitcmd.ClassTooManyRefs: "too-many-refs"} {
		st, ok := limitStates[string(class)]
		if !ok || st.String() != name || parseState(name) != st {
			t.Errorf("class %s: state %v (%q), ok=%v; want %q", class, st, st.String(), ok, name)
		}
	}
	if _, ok := limitStates[string(gitcmd.ClassNetwork)]; ok {
		t.Error("a network error is shown as a limit")
	}
}
