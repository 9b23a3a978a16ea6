package node

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestMaintPlanRunsTheMostInNeedFirstAndDropsTheRest(t *testing.T) {
	p := newMaintPlan()
	for _, k := range []repokey.Key{"a", "b", "c", "d"} {
		p.note(k)
	}
	p.note("a") // noted twice: probed once
	if got := p.toProbe(3); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("first probes = %v, want [a b c] (oldest first, no duplicate)", got)
	}
	p.probed("a", mirror.Need{Score: 1.5})
	p.probed("b", mirror.Need{Score: 0.5}) // no need: dropped
	p.probed("c", mirror.Need{Score: 25, Full: true})
	if got := p.toProbe(64); len(got) != 1 || got[0] != "d" {
		t.Fatalf("second probes = %v, want [d]", got)
	}
	p.probed("d", mirror.Need{Score: 3})
	var order []repokey.Key
	for {
		k, need, ok := p.take()
		if !ok {
			break
		}
		if k == "c" && !need.Full {
			t.Fatal("the need taken is not the one probed")
		}
		order = append(order, k)
		p.done(k)
	}
	if len(order) != 3 || order[0] != "c" || order[1] != "d" || order[2] != "a" {
		t.Fatalf("runs in the order %v, want [c d a] (most in need first; b needed none)", order)
	}
	if p.candidates() != 0 {
		t.Fatalf("%d candidates left, want 0", p.candidates())
	}
}

func TestMaintPlanNotedWhileRunningIsProbedAgainAfter(t *testing.T) {
	p := newMaintPlan()
	p.note("a")
	p.toProbe(1)
	p.probed("a", mirror.Need{Score: 2})
	k, _, _ := p.take()
	p.note(k)                          // fetched while it is maintained
	p.probed(k, mirror.Need{Score: 9}) // a stale probe: ignored
	if _, _, ok := p.take(); ok {
		t.Fatal("a mirror being maintained was given to a second lane")
	}
	p.done(k)
	if got := p.toProbe(8); len(got) != 1 || got[0] != "a" {
		t.Fatalf("after its run, probes = %v, want [a]", got)
	}
	// A new probe that finds no need drops a mirror that waited.
	p.probed("a", mirror.Need{Score: 2})
	p.note("a")
	p.toProbe(8)
	p.probed("a", mirror.Need{})
	if _, _, ok := p.take(); ok || p.candidates() != 0 {
		t.Fatal("a mirror whose last probe found no need is still waiting")
	}
	// A mirror that is gone is forgotten.
	p.note("gone")
	p.toProbe(8)
	p.probed("gone", mirror.Need{Score: 4})
	p.forget("gone")
	if _, _, ok := p.take(); ok {
		t.Fatal("a forgotten mirror was taken")
	}
}

func TestDutyWaitKeepsALaneBusyAtMostItsShare(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name      string
		lastStart time.Time
		lastDur   time.Duration
		duty      float64
		now       time.Time
		want      time.Duration
	}{
		{"first run", time.Time{}, 0, 0.1, t0, 0},
		{"right after a 2 s run at 10%", t0, 2 * time.Second, 0.1, t0.Add(2 * time.Second), 18 * time.Second},
		{"20 s after a 2 s run at 10%", t0, 2 * time.Second, 0.1, t0.Add(20 * time.Second), 0},
		{"a 1 s run at 50%", t0, time.Second, 0.5, t0.Add(time.Second), time.Second},
		{"duty 1: no bound", t0, time.Minute, 1, t0.Add(time.Minute), 0},
	}
	for _, c := range cases {
		if got := dutyWait(c.lastStart, c.lastDur, c.duty, c.now); got != c.want {
			t.Errorf("%s: dutyWait = %v, want %v", c.name, got, c.want)
		}
	}
}
