package fullnode

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repostate"
)

// A departed repository's mirror is served as last verified for
// --retention from when its state was first seen, a legal one not at all,
// and every other state as before.
func TestADepartedMirrorIsServedForTheRetentionUnlessLegal(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	for _, tc := range []struct {
		state     repostate.State
		since     int64
		retention time.Duration
		withheld  bool
	}{
		{repostate.Legal, ms(time.Second), week, true},
		{repostate.Legal, 0, week, true},
		{repostate.Deleted, ms(6 * 24 * time.Hour), week, false},
		{repostate.Deleted, ms(week), week, true},
		{repostate.Deleted, ms(time.Second), 0, true},
		{repostate.Deleted, 0, week, false}, // first seen by a previous version: unknown
		{repostate.Gone, ms(8 * 24 * time.Hour), week, true},
		{repostate.Disabled, ms(time.Hour), week, false},
		{repostate.Archived, ms(365 * 24 * time.Hour), week, false},
		{repostate.Failing, ms(365 * 24 * time.Hour), week, false},
		{repostate.OK, 0, 0, false},
	} {
		if got := withheldState(tc.state, tc.since, tc.retention, now); got != tc.withheld {
			t.Errorf("%s since %v, retention %v: withheld %v, want %v", tc.state, now.Sub(time.UnixMilli(tc.since)), tc.retention, got, tc.withheld)
		}
	}
}
