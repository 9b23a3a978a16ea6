package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// 64 bytes rot in the middle of a blob's compressed data in the mirror's
// pack, where rev-list never looks: the scheduled integrity scan, within
// its interval of the fake clock, finds it, takes the mirror out of
// service and repairs it from the upstream.
func TestTheScheduledScanFindsBitRotInsideAPackAndRepairsIt(t *testing.T) {
	r := newCrashRig(t)
	if _, err := r.up.AddBlob("c", "main", 8192); err != nil {
		t.Fatal(err)
	}
	n := r.start()
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := n.mirror.Sync(ctx, repokey.Key(r.key), r.url); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gittest.RotPack(n.mirror.Path(repokey.Key(r.key))); err != nil {
		t.Fatal(err)
	}
	const interval = 7 * 24 * time.Hour
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n.clk, n.cfg.IntegrityInterval, n.integrity = clk, interval, newIntegrityScan(interval)
	n.digests[repokey.Key(r.key)] = "held"
	states := make(chan repostate.State, 16)
	n.integrity.changed = func(key repokey.Key) {
		s, broken := n.integrity.brokenState(repokey.Key(key))
		if !broken {
			s = repostate.OK
		}
		states <- s
	}
	start := clk.Now()
	done := make(chan struct{})
	go func() {
		n.integrityLoop(ctx)
		close(done)
	}()
	stop := clk.StartDriving(time.Minute)
	var seen []repostate.State
	for len(seen) == 0 || seen[len(seen)-1] != repostate.OK {
		select {
		case s := <-states:
			seen = append(seen, s)
		case <-time.After(10 * time.Millisecond):
			if late := clk.Now().Sub(start); late > 2*interval {
				t.Fatalf("the scan did not find the rot in %v of fake time (states %v)", late, seen)
			}
		}
	}
	stop()
	cancel()
	<-done
	if want := []repostate.State{repostate.Corrupt, repostate.Repairing, repostate.OK}; !slices.Equal(seen, want) {
		t.Fatalf("states %v, want %v", seen, want)
	}
	if took := clk.Now().Sub(start); took > interval {
		t.Fatalf("found %v after the start, later than the interval %v", took, interval)
	}
	if err := n.mirror.Verify(context.Background(), repokey.Key(r.key)); err != nil {
		t.Fatalf("the repaired mirror: %v", err)
	}
	if err := gittest.Git(n.mirror.Path(repokey.Key(r.key)), "fsck", "--no-dangling", "--no-progress"); err != nil {
		t.Fatalf("git fsck of the repaired mirror: %v", err)
	}
}
