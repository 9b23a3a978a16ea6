package ctl

import (
	"fmt"
	"strings"
	"testing"
	"time"

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

// ctl catalog prints why the catalog cannot be read and exits non-zero,
// with --json too, so that a script sees it.
func TestAnUnreadableCatalogIsPrintedAndExitsNonZero(t *testing.T) {
	f := newFixture(t)
	since := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		commit string
		repos  int
		want   string
	}{
		{"", 0, "commit none yet: 0 repositories, 0 entries skipped\n"},
		{"c0ffee", 3, "commit c0ffee: 3 repositories, 0 entries skipped\n"},
	} {
		f.b.mu.Lock()
		f.b.catalog = &api.CatalogStatus{Commit: tc.commit, Repos: tc.repos, Error: "catalog: fetch /srv/nope: does not appear to be a git repository", ErrorAt: &since}
		f.b.mu.Unlock()
		code, out, errOut := f.run(t, "catalog")
		keeps := "no repositories until it can"
		if tc.commit != "" {
			keeps = "the last good commit stays applied"
		}
		wantErr := "gitfleet ctl: the catalog cannot be read since 2026-11-27T10:00:00Z (" + keeps + "): catalog: fetch /srv/nope: does not appear to be a git repository\n"
		if code != 1 || out != tc.want || errOut != wantErr {
			t.Errorf("commit %q: exit %d, output %q, stderr %q; want 1, %q, %q", tc.commit, code, out, errOut, tc.want, wantErr)
		}
		code, out, errOut = f.run(t, "catalog", "--json")
		if code != 1 || !strings.Contains(out, `"error": "catalog: fetch /srv/nope`) || errOut != wantErr {
			t.Errorf("--json: exit %d, output %q, stderr %q", code, out, errOut)
		}
	}
}
