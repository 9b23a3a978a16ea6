package coordinator

import (
	"testing"

	"github.com/gitfleet/gitfleet/internal/catalog"
)

func TestProblemLinesNameFileAndLineAndAreBounded(t *testing.T) {
	var problems []catalog.Problem
	for i := range maxProblemLines + 5 {
		problems = append(problems, catalog.Problem{File: "lists/a.list", Line: i + 1, Reason: "not a URL"})
	}
	lines := problemLines(problems)
	if len(lines) != maxProblemLines || lines[2] != "lists/a.list:3: not a URL" {
		t.Errorf("%d lines, the third %q", len(lines), lines[2])
	}
	if got := problemLines(nil); len(got) != 0 {
		t.Errorf("no problems: %v", got)
	}
}
