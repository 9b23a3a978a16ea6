package api

import "testing"

func TestHeldSummaryNamesTheFirstKeysAndTheCount(t *testing.T) {
	keys := []string{"h.org/a/1", "h.org/a/2", "h.org/a/3", "h.org/a/4", "h.org/a/5", "h.org/a/6"}
	for _, tc := range []struct {
		p    PendingPurge
		want string
	}{
		{PendingPurge{Commit: "0123456789abcdef", Removed: 2000, Total: 10000, Keys: keys},
			"the removal of 2000 of 10000 repositories is held (catalog commit 0123456789ab): h.org/a/1, h.org/a/2, h.org/a/3, h.org/a/4, h.org/a/5 and 1995 more"},
		{PendingPurge{Commit: "c", Removed: 2, Total: 3, Keys: keys[:2]},
			"the removal of 2 of 3 repositories is held (catalog commit c): h.org/a/1, h.org/a/2"},
		{PendingPurge{Commit: "c", Removed: 2, Total: 3},
			"the removal of 2 of 3 repositories is held (catalog commit c)"},
	} {
		if got := tc.p.Summary(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
