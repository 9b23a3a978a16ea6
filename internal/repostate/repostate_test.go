package repostate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEveryStateHasANameThatParsesBack(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All() {
		name := s.String()
		if name == "" || seen[name] {
			t.Fatalf("state %d: name %q empty or taken", s, name)
		}
		seen[name] = true
		if got, err := Parse(name); err != nil || got != s {
			t.Errorf("Parse(%q) = %v, %v; want %v", name, got, err, s)
		}
	}
	if len(seen) != len(names) || len(Names()) != len(names) {
		t.Errorf("All has %d states, Names %d, names %d", len(seen), len(Names()), len(names))
	}
}

// The names are on the wire (the API, the coordinator's messages and
// store): they never change.
func TestWireNames(t *testing.T) {
	want := map[State]string{Pending: "pending", OK: "ok", Failing: "failing", Gone: "gone", TooLarge: "too-large",
		TooManyRefs: "too-many-refs", Unplaceable: "unplaceable", Corrupt: "corrupt", Repairing: "repairing", Unchecked: "unchecked",
		Deleted: "deleted", Legal: "legal", Disabled: "disabled", Archived: "archived", Renamed: "renamed"}
	for s, name := range want {
		if s.String() != name {
			t.Errorf("%d is %q, want %q", s, s.String(), name)
		}
	}
	b, err := json.Marshal(struct{ State State }{TooManyRefs})
	if err != nil || string(b) != `{"State":"too-many-refs"}` {
		t.Errorf("JSON: %s, %v", b, err)
	}
}

func TestAnUnknownStateIsAnErrorThatListsTheStates(t *testing.T) {
	_, err := Parse("bogus")
	if err == nil {
		t.Fatal("bogus parsed")
	}
	for _, s := range All() {
		if !strings.Contains(err.Error(), s.String()) {
			t.Errorf("%q does not list %s", err, s)
		}
	}
	var s State
	if err := json.Unmarshal([]byte(`"bogus"`), &s); err == nil {
		t.Error("JSON: bogus read as a state")
	}
	if State(200).String() != "pending" {
		t.Error("a state out of range does not read as pending")
	}
}
