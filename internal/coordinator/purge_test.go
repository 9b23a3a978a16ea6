package coordinator

import (
	"testing"
	"time"
)

func TestRemovalWindowCountsOnlyTheWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var w removalWindow
	w.add(t0, 3)
	w.add(t0.Add(time.Hour), 2)
	w.add(t0.Add(2*time.Hour), 0) // nothing to remember
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{time.Hour, 5},
		{23 * time.Hour, 5},
		{24 * time.Hour, 2}, // the first removals left the window
		{25 * time.Hour, 0},
	} {
		if got := w.count(t0.Add(tc.at), 24*time.Hour); got != tc.want {
			t.Errorf("count at +%v = %d, want %d", tc.at, got, tc.want)
		}
	}
	if len(w.Events) != 0 {
		t.Fatalf("%d events kept after they all left the window", len(w.Events))
	}
}
