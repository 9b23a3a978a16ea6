package sim

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestDbg2(t *testing.T) {
	if os.Getenv("DBG2") == "" {
		t.Skip()
	}
	for _, hist := range []int{0, 30, 120} {
		tr := Generate(KindPoissonHeavyTail, 1000, hist+30, 1)
		res, _ := Run(tr, Options{Policies: []string{"adaptive", "fixed", "compass", "optimal"}, Budget: 1000.0 / 24, Start: epoch.Add(time.Duration(hist) * 24 * time.Hour), End: epoch.Add(time.Duration(hist+30) * 24 * time.Hour)})
		line := fmt.Sprintf("hist=%3dd", hist)
		for _, r := range res {
			line += fmt.Sprintf(" %s=%.4f(%d)", r.Policy, 1-r.Freshness, r.Checks)
		}
		fmt.Println(line)
	}
}
