package ctl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/api"
)

func TestAHeldCatalogChangeIsNamedByCatalogAndNodes(t *testing.T) {
	f := newFixture(t)
	for _, cmd := range []string{"catalog", "nodes"} {
		if code, out, _ := f.run(t, cmd); code != 0 || strings.Contains(out, "HELD") {
			t.Errorf("%s with nothing held: exit %d output:\n%s", cmd, code, out)
		}
	}
	var keys []string
	for i := range 1000 {
		keys = append(keys, fmt.Sprintf("github.com/gone/r%04d", i))
	}
	f.b.mu.Lock()
	f.b.held = &api.PendingPurge{Commit: strings.Repeat("ab", 20), Removed: 1200, Total: 20000, Keys: keys}
	f.b.mu.Unlock()
	want := "HELD BACK: the removal of 1200 of 20000 repositories is held (catalog commit abababababab): " +
		"github.com/gone/r0000, github.com/gone/r0001, github.com/gone/r0002, github.com/gone/r0003, github.com/gone/r0004 and 1195 more; " +
		"run `gitfleet ctl confirm-purge` to apply it\n"
	for _, cmd := range []string{"catalog", "nodes"} {
		code, out, _ := f.run(t, cmd)
		if code != 0 || !strings.HasSuffix(out, want) || strings.Contains(out, "r0005") {
			t.Errorf("%s: exit %d output:\n%s\nwant it to end with:\n%s", cmd, code, out, want)
		}
	}
}
