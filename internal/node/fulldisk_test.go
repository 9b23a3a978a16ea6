package node

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

func TestDiskMarkCrossesOnceEachWay(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var m diskMark
	steps := []struct {
		used, total uint64
		crossed     bool
		full        bool
	}{
		{10, 100, false, false},
		{85, 100, false, false}, // at the mark is not above it
		{86, 100, true, true},
		{99, 100, false, true},
		{90, 100, false, true},
		{50, 100, true, false},
		{50, 0, false, false}, // unknown size: never full
		{200, 100, true, true},
	}
	for i, s := range steps {
		clk.Advance(time.Second)
		if got := m.observe(s.used, s.total, 0.85, clk.Now()); got != s.crossed || m.full != s.full {
			t.Fatalf("step %d (%d/%d): crossed %v full %v, want %v %v", i, s.used, s.total, got, m.full, s.crossed, s.full)
		}
		if s.crossed && !m.since.Equal(clk.Now()) {
			t.Fatalf("step %d: since %v, want %v", i, m.since, clk.Now())
		}
	}
}

func TestAdmitPull(t *testing.T) {
	cases := []struct {
		full, held bool
		policy     string
		want       bool
	}{
		{false, false, FullDiskRefuseNew, true},
		{false, true, FullDiskRefuseAll, true},
		{true, false, FullDiskRefuseNew, false},
		{true, true, FullDiskRefuseNew, true},
		{true, false, FullDiskRefuseAll, false},
		{true, true, FullDiskRefuseAll, false},
	}
	for _, c := range cases {
		if got := admitPull(c.full, c.held, c.policy); got != c.want {
			t.Errorf("admitPull(full %v, held %v, %s) = %v, want %v", c.full, c.held, c.policy, got, c.want)
		}
	}
	if ValidFullDiskPolicy("refuse-some") == nil || ValidFullDiskPolicy(FullDiskRefuseAll) != nil {
		t.Error("ValidFullDiskPolicy")
	}
}
