package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestIntegrityPlanSpreadsMirrorsOverTheInterval(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	p := newIntegrityPlan(week, 0.1)
	for i := range 1000 {
		p.add(repokey.Key(fmt.Sprintf("h/r%d", i)), time.Time{}, t0)
	}
	// Drive a week of simulated time: each verification takes 1 s.
	now, verified := t0, map[repokey.Key]int{}
	for now.Before(t0.Add(week)) {
		key, ok, wait := p.next(now)
		if !ok {
			now = now.Add(wait)
			continue
		}
		now = now.Add(time.Second)
		p.done(key, now, time.Second)
		verified[key]++
	}
	if len(verified) < 990 {
		t.Fatalf("%d of 1000 mirrors verified in one interval, want about all", len(verified))
	}
	for k, n := range verified {
		if n > 2 {
			t.Fatalf("%s verified %d times in one interval, want about once", k, n)
		}
	}
}

func TestIntegrityPlanKeepsToItsShareOfTheTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newIntegrityPlan(time.Hour, 0.1) // far too short for the work: the duty bound wins
	for i := range 100 {
		p.add(repokey.Key(fmt.Sprintf("h/r%d", i)), t0.Add(-2*time.Hour), t0)
	}
	now, busy := t0, time.Duration(0)
	for now.Before(t0.Add(time.Hour)) {
		key, ok, wait := p.next(now)
		if !ok {
			now = now.Add(wait)
			continue
		}
		now = now.Add(10 * time.Second)
		busy += 10 * time.Second
		p.done(key, now, 10*time.Second)
	}
	if share := busy.Seconds() / now.Sub(t0).Seconds(); share > 0.11 {
		t.Fatalf("verifying took %.2f of the time, want at most 0.1", share)
	}
}

func TestIntegrityPlanUrgentGoesFirstButNotTwiceInAGap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newIntegrityPlan(24*time.Hour, 0.1)
	p.add("h/a", t0.Add(-time.Hour), t0)
	p.add("h/b", t0.Add(-time.Hour), t0)
	if _, ok, _ := p.next(t0); ok {
		t.Fatal("a mirror verified an hour ago is due again")
	}
	if !p.urgent("h/b", t0) {
		t.Fatal("urgent refused")
	}
	key, ok, _ := p.next(t0)
	if !ok || key != "h/b" {
		t.Fatalf("next = %q %v, want h/b at once", key, ok)
	}
	p.done("h/b", t0.Add(time.Second), time.Second)
	if p.urgent("h/b", t0.Add(time.Minute)) {
		t.Fatal("a mirror verified a minute ago was made urgent again")
	}
	if !p.urgent("h/b", t0.Add(urgentIntegrityGap+time.Second)) {
		t.Fatal("urgent refused after the gap")
	}
}

// A failed repair's retry comes after its minute, not after the gap that
// spreads a week over the mirrors (here 100 minutes), while the mirror is
// not served; and while it waits, the rest of the scan goes on.
func TestIntegrityPlanRetriesARepairWithinItsDelayWithoutHoldingTheScan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	p := newIntegrityPlan(week, 0.1)
	for i := range 100 {
		p.add(repokey.Key(fmt.Sprintf("h/r%d", i)), t0.Add(-week+time.Duration(i)*time.Hour), t0)
	}
	p.done("h/r0", t0, time.Second) // its check found it corrupt, and the repair failed:
	p.retry("h/r0", t0, time.Minute)
	if key, ok, wait := p.next(t0.Add(30 * time.Second)); ok || wait > 31*time.Second {
		t.Fatalf("half a minute after a failed repair: next = %q %v, wait %v; want a wait of the rest of the minute", key, ok, wait)
	}
	if key, ok, _ := p.next(t0.Add(time.Minute + time.Second)); !ok || key != "h/r0" {
		t.Fatalf("a minute after a failed repair: next = %q %v, want h/r0 again", key, ok)
	}
	// A repair that fails for hours: the scan's other mirrors still come
	// in their turn between its retries.
	now, others := t0.Add(time.Minute), 0
	for now.Before(t0.Add(12 * time.Hour)) {
		key, ok, wait := p.next(now)
		if !ok {
			now = now.Add(wait)
			continue
		}
		now = now.Add(time.Second)
		p.done(key, now, time.Second)
		if key == "h/r0" {
			p.retry(key, now, time.Minute)
		} else {
			others++
		}
	}
	if others < 3 {
		t.Errorf("%d other mirrors checked in 12 hours of failed repairs, want the scan to go on (one every %v)", others, week/100)
	}
}
