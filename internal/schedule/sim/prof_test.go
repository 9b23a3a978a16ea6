package sim

import (
	"os"
	"testing"
)

func TestProf(t *testing.T) {
	f, _ := os.Open("/work/shared/data/traces/github-365d.csv")
	tr, _ := ReadTrace(f)
	for _, p := range []string{"adaptive", "fixed", "compass"} {
		Run(tr, Options{Policies: []string{p}, Budget: 4 * 61 / 24.0})
	}
}
