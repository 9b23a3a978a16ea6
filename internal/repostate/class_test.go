package repostate

import (
	"encoding/json"
	"testing"
)

// The texts are the API's and the console's (and the coordinator's store
// keeps them), and the numbers are on the wire: neither ever changes.
func TestClassTextsAndNumbersNeverChange(t *testing.T) {
	want := []string{"", "failed", "upstream unreachable", "not found", "timeout", "too large", "too many refs",
		"bad objects", "empty advertisement", "blocked destination", "upstream refused access", "upstream throttled",
		"invalid URL", "mirror error", "disk full", "cancelled", "unavailable for legal reasons", "forged refs",
		"refs differ from the upstream"}
	if len(want) != int(numClasses) {
		t.Fatalf("%d classes, want %d: a class is added at the end, with its text here", numClasses, len(want))
	}
	for n, text := range want {
		c := ClassFromWire(uint32(n))
		if c.String() != text {
			t.Errorf("class %d is %q, want %q", n, c, text)
		}
		if got, err := ParseClass(text); err != nil || got != c {
			t.Errorf("ParseClass(%q) = %v, %v; want %d", text, got, err, n)
		}
	}
	if len(Classes()) != int(numClasses)-1 || Classes()[0] != ClassOther {
		t.Errorf("Classes() = %v", Classes())
	}
	b, err := json.Marshal(struct{ C Class }{ClassNotFound})
	if err != nil || string(b) != `{"C":"not found"}` {
		t.Errorf("JSON: %s, %v", b, err)
	}
	var back struct{ C Class }
	if err := json.Unmarshal(b, &back); err != nil || back.C != ClassNotFound {
		t.Errorf("JSON back: %v, %v", back.C, err)
	}
}

// A newer version's class, or a failure stored without one, shows as
// "failed": it claims nothing it does not know.
func TestAnUnknownClassIsFailed(t *testing.T) {
	if c := ClassFromWire(uint32(numClasses)); c != ClassOther || c.String() != "failed" {
		t.Errorf("an unknown number reads as %v", c)
	}
	if Class(200).String() != "failed" {
		t.Error("a class out of range does not read as failed")
	}
	if NoClass.OrOther() != ClassOther || ClassTimeout.OrOther() != ClassTimeout {
		t.Error("OrOther")
	}
	if _, err := ParseClass("bogus"); err == nil {
		t.Error("bogus parsed")
	}
}
