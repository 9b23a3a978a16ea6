package pullplan

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

const (
	hintKey  = "github.com/a/b"
	oldRefs  = "0000000000000000000000000000000a"
	newRefs  = "0000000000000000000000000000000b"
	hintWait = 3 * time.Minute
)

func newTestBook() *hintBook { b := newHintBook(hintWait, 10); return &b }

func TestAnOwnerClaimingUnchangedAfterAPushIsCheckedAndCountedOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	verified := clk.Now().Add(-time.Hour)
	pushed := clk.Now()
	if act := b.hear(hintKey, pushed, clk.Now(), verified, oldRefs, 7); act != None {
		t.Fatalf("a webhook after verified_at: %v, want a hint", act)
	}
	if !b.pending(hintKey) {
		t.Fatal("a change heard of is pending: the repository cannot be current")
	}
	clk.Advance(2 * time.Minute) // more than the owner's clock may be ahead
	if act := b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now()); act != CheckNow {
		t.Fatalf("owner reports the old refs after the push: %v, want a check of the upstream now", act)
	}
	// The same report again (the coordinator resends the state) asks again,
	// but nothing is counted before the upstream has been seen to differ.
	if act := b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now()); act == CountStale {
		t.Fatal("counted before the upstream was asked")
	}
	clk.Advance(time.Second)
	act, owner := b.checked(hintKey, clk.Now(), true, newRefs)
	if act != CountStale || owner != 7 {
		t.Fatalf("the upstream differs: %v against node %d, want a stale report against node 7", act, owner)
	}
	if b.pending(hintKey) || b.stale(hintKey) != oldRefs {
		t.Fatalf("after the fetch: pending %v, stale digest %q: want served, and the owner's %q known stale", b.pending(hintKey), b.stale(hintKey), oldRefs)
	}
	// The owner keeps reporting the old refs, and a second check (a spot
	// check) finds the upstream where the full node is: still one report.
	clk.Advance(time.Minute)
	if act := b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now()); act != None {
		t.Fatalf("the same owner's next report of the same hint: %v, want nothing (counted once a hint)", act)
	}
	if act, _ := b.checked(hintKey, clk.Now(), true, newRefs); act != None {
		t.Fatalf("a second differing check of the same hint: %v, want nothing", act)
	}
}

func TestTwoHintsOfOneChangeCountOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	verified := clk.Now().Add(-time.Hour)
	b.hear(hintKey, clk.Now().Add(-10*time.Second), clk.Now(), verified, oldRefs, 7) // the feed's push time
	clk.Advance(time.Second)
	b.hear(hintKey, clk.Now(), clk.Now(), verified, oldRefs, 7) // the webhook of the same push
	if len(b.hints) != 1 {
		t.Fatalf("%d hints, want one", len(b.hints))
	}
	clk.Advance(2 * time.Minute)
	b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now())
	counts := 0
	for range 3 { // three checks end (a hint's, a spot check's, a retry's)
		if act, _ := b.checked(hintKey, clk.Now(), true, newRefs); act == CountStale {
			counts++
		}
	}
	if counts != 1 {
		t.Fatalf("%d stale reports for one change, want 1", counts)
	}
}

func TestAnOwnerSilentPastTheWaitIsCheckedThenCountedAtItsStaleReport(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	pushed := clk.Now()
	b.hear(hintKey, pushed, clk.Now(), pushed.Add(-time.Hour), oldRefs, 7)
	clk.Advance(hintWait - time.Second)
	if keys, next := b.due(clk.Now()); len(keys) != 0 || !next.Equal(pushed.Add(hintWait)) {
		t.Fatalf("before the wait: due %v, next %v; want none, next at %v", keys, next, pushed.Add(hintWait))
	}
	clk.Advance(time.Second)
	if keys, _ := b.due(clk.Now()); !slices.Equal(keys, []repokey.Key{hintKey}) {
		t.Fatalf("at the wait: due %v, want %s", keys, hintKey)
	}
	if keys, _ := b.due(clk.Now()); len(keys) != 0 {
		t.Fatalf("due twice: %v", keys)
	}
	if act, _ := b.checked(hintKey, clk.Now(), true, newRefs); act != None {
		t.Fatalf("an owner that said nothing is not counted: %v", act)
	}
	clk.Advance(time.Hour)
	if act := b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now()); act != CountStale {
		t.Fatalf("the owner then reports the old refs: %v, want a stale report", act)
	}
}

// A second push after the full node fetched the first itself: the owner's
// copy found behind is still a claim, so its report asks the upstream
// (equal: settled, nothing counted twice), and its refs are not pulled.
func TestAPushAfterAFetchedHintKeepsTheOwnersOldCopyAClaim(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	b.hear(hintKey, clk.Now(), clk.Now(), clk.Now().Add(-time.Hour), oldRefs, 7)
	clk.Advance(2 * time.Minute)
	b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now())
	if act, _ := b.checked(hintKey, clk.Now(), true, newRefs); act != CountStale {
		t.Fatalf("first push: %v", act)
	}
	clk.Advance(time.Minute)
	b.hear(hintKey, clk.Now(), clk.Now(), clk.Now().Add(-time.Minute), newRefs, 7) // a redelivery, or a new push
	if !b.pending(hintKey) || b.stale(hintKey) != oldRefs {
		t.Fatalf("pending %v, stale %q: want pending, the old copy still known stale", b.pending(hintKey), b.stale(hintKey))
	}
	clk.Advance(time.Second)
	if act := b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now()); act != CheckNow {
		t.Fatalf("the owner's old copy again: %v, want a check", act)
	}
	if act, _ := b.checked(hintKey, clk.Now(), false, oldRefs); act != None || len(b.hints) != 0 {
		t.Fatalf("the upstream is what is served: %v, %d hints; want settled without a count", act, len(b.hints))
	}
}

// An owner whose copy does not move is claiming "unchanged", even when the
// full node serves another copy (it fetched an earlier push itself).
func TestAnOwnerRepeatingItsLastReportClaimsUnchanged(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	const frozen = "0000000000000000000000000000000f"
	b.hear(hintKey, clk.Now(), clk.Now(), clk.Now().Add(-time.Hour), newRefs, 7)
	b.ownerHad(hintKey, frozen)
	if !b.claims(hintKey, frozen) || b.claims(hintKey, "00000000000000000000000000000001") {
		t.Fatal("claims: want the owner's last report only (and the served copy)")
	}
	clk.Advance(2 * time.Minute)
	if act := b.reported(hintKey, 7, clk.Now(), frozen, clk.Now()); act != CheckNow {
		t.Fatalf("the owner's unmoved copy after the push: %v, want a check", act)
	}
	if act, owner := b.checked(hintKey, clk.Now(), true, newRefs); act != CountStale || owner != 7 {
		t.Fatalf("the upstream differs: %v %d", act, owner)
	}
}

// An on-demand check bounds no push: the owner's "unchanged" is checked,
// but counted only when the owner repeats it after the full node found the
// upstream ahead. A webhook during it bounds the push from then on.
func TestAnOnDemandCheckVerifiesButCountsOnlyLaterClaims(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	b.verifyOnDemand(hintKey, clk.Now(), oldRefs, 7)
	if b.pending(hintKey) {
		t.Fatal("an on-demand check tells of no change: the repository stays current")
	}
	clk.Advance(time.Second)
	if act := b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now()); act != CheckNow {
		t.Fatalf("the owner's answer: %v, want a check", act)
	}
	clk.Advance(time.Second)
	if act, _ := b.checked(hintKey, clk.Now(), true, newRefs); act != None {
		t.Fatalf("the upstream differs: %v; the push may have come after the owner's check", act)
	}
	if act := b.reported(hintKey, 7, clk.Now().Add(-time.Millisecond), oldRefs, clk.Now()); act != None {
		t.Fatalf("a report of a check before the full node's: %v", act)
	}
	clk.Advance(2 * time.Minute)
	if act := b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now()); act != CountStale {
		t.Fatalf("the old copy after the full node found the upstream ahead: %v, want a stale report", act)
	}

	b.verifyOnDemand("h/other", clk.Now(), oldRefs, 7)
	clk.Advance(time.Second)
	b.hear("h/other", clk.Now(), clk.Now(), clk.Now().Add(-time.Hour), oldRefs, 7) // the webhook
	clk.Advance(2 * time.Minute)
	b.reported("h/other", 7, clk.Now(), oldRefs, clk.Now())
	if act, _ := b.checked("h/other", clk.Now(), true, newRefs); act != CountStale {
		t.Fatalf("a claim after a webhook: %v, want a stale report", act)
	}
}

// An owner's clock may run ahead: a report stamped within maxClockSkew of
// the push is checked, not held against the owner. The answer of a check
// asked for after the push is, whatever its stamp.
func TestAClaimWithinTheClockSkewIsCheckedButOnlyATasksAnswerCounts(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	pushed := clk.Now()
	b.hear(hintKey, pushed, clk.Now(), pushed.Add(-time.Hour), oldRefs, 7)
	clk.Advance(10 * time.Second)
	if act := b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now()); act != CheckNow {
		t.Fatalf("a claim 10 s after the push: %v, want a check", act)
	}
	if act, _ := b.checked(hintKey, clk.Now(), true, newRefs); act != None {
		t.Fatalf("a claim within the skew counted: %v", act)
	}
	if act := b.taskClaim(hintKey, pushed.Add(-time.Second), oldRefs, clk.Now()); act != None {
		t.Fatalf("the answer of a check asked for before the push counted: %v", act)
	}
	if act := b.taskClaim(hintKey, pushed, oldRefs, clk.Now()); act != CountStale {
		t.Fatalf("the answer of a check asked for after the push: %v, want a stale report", act)
	}
	if act := b.taskClaim(hintKey, pushed, oldRefs, clk.Now()); act != None {
		t.Fatalf("the same hint counted twice: %v", act)
	}
}

// An owner ahead of the full node (it reported the push before the full
// node pulled it) that reports the same copy again after a webhook is
// right: the full node fetches the push itself, and counts nothing.
func TestAnOwnerAheadOfTheFullNodeIsNotCountedStale(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	b.hear(hintKey, clk.Now(), clk.Now(), clk.Now().Add(-time.Hour), oldRefs, 7)
	b.ownerHad(hintKey, newRefs) // its report, not pulled yet
	clk.Advance(2 * time.Minute)
	if act := b.reported(hintKey, 7, clk.Now(), newRefs, clk.Now()); act != CheckNow {
		t.Fatalf("the owner's copy again: %v, want a check", act)
	}
	if act, _ := b.checked(hintKey, clk.Now(), true, newRefs); act != None {
		t.Fatalf("the upstream has the owner's copy: %v, want no stale report", act)
	}
	clk.Advance(time.Minute)
	if act := b.reported(hintKey, 7, clk.Now(), newRefs, clk.Now()); act != None || len(b.hints) != 0 {
		t.Fatalf("the owner's copy, the upstream's, once more: %v, %d hints; want settled", act, len(b.hints))
	}
}

func TestAnOwnerThatBringsTheChangeSettlesTheHint(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	pushed := clk.Now()
	b.hear(hintKey, pushed, clk.Now(), pushed.Add(-time.Hour), oldRefs, 7)
	clk.Advance(time.Second)
	if act := b.reported(hintKey, 7, clk.Now(), newRefs, clk.Now()); act != None {
		t.Fatalf("owner reports new refs: %v", act)
	}
	clk.Advance(time.Second)
	b.verified(hintKey, clk.Now()) // the pull's listing equalled what it brought
	if b.pending(hintKey) || len(b.hints) != 0 {
		t.Fatal("a verified pull after the push settles the hint")
	}
}

func TestAnUpstreamEqualToWhatIsServedSettlesTheHintWithoutACount(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	b.hear(hintKey, clk.Now(), clk.Now(), clk.Now().Add(-time.Hour), oldRefs, 7)
	clk.Advance(time.Second)
	b.reported(hintKey, 7, clk.Now(), oldRefs, clk.Now())
	if act, _ := b.checked(hintKey, clk.Now(), false, oldRefs); act != None {
		t.Fatalf("the owner was right (a push that changed no branch or tag): %v", act)
	}
	if len(b.hints) != 0 {
		t.Fatal("hint left open")
	}
}

func TestReportsAndFeedsBeforeThePushDoNotDecide(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	verified := clk.Now().Add(-time.Hour)
	// A feed says the last push was before verified_at: nothing changed.
	if act := b.hear(hintKey, verified.Add(-time.Minute), clk.Now(), verified, oldRefs, 7); act != Verified {
		t.Fatalf("a push before verified_at: %v, want verified_at advanced", act)
	}
	if act := b.hear(hintKey, clk.Now(), clk.Now(), time.Time{}, oldRefs, 7); act != None {
		t.Fatalf("a push on a never verified repository: %v, want a hint", act)
	}
	// The owner's report of a check made before the push says nothing of it.
	if act := b.reported(hintKey, 7, clk.Now().Add(-time.Second), oldRefs, clk.Now()); act != None {
		t.Fatalf("a check before the push: %v", act)
	}
	// A feed's older push time while the hint is open leaves it open.
	if act := b.hear(hintKey, verified.Add(-time.Minute), clk.Now(), verified, oldRefs, 7); act != Verified && !b.pending(hintKey) {
		t.Fatal("an older push closed an open hint")
	}
}

func TestTheHintBookIsBounded(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := newTestBook()
	for i := range 10 {
		if act := b.hear(repokey.Key(fmt.Sprintf("h/%d", i)), clk.Now(), clk.Now(), time.Time{}, oldRefs, 1); act != None {
			t.Fatalf("hint %d: %v", i, act)
		}
	}
	if act := b.hear("h/overflow", clk.Now(), clk.Now(), time.Time{}, oldRefs, 1); act != RefusedFull {
		t.Fatalf("past the bound: %v", act)
	}
	// A watch (fetched, waiting for the owner) expires.
	b.hints["h/0"].fetched, b.hints["h/0"].expires = true, clk.Now().Add(time.Hour)
	clk.Advance(time.Hour)
	b.due(clk.Now())
	if _, ok := b.hints["h/0"]; ok {
		t.Fatal("an expired watch is kept")
	}
}

func TestSpotChecksPickTheOldestVerifiedFirst(t *testing.T) {
	all := map[repokey.Key]uint32{"a": 500, "b": 0, "c": 100, "d": 300, "e": 200, "own": 1, "feed": 2}
	keep := func(k repokey.Key) bool { return k != "own" && k != "feed" }
	got := OldestVerified(maps.All(all), 3, keep)
	if want := []repokey.Key{"b", "c", "e"}; !slices.Equal(got, want) {
		t.Fatalf("picked %v, want %v (never verified first, then the oldest; own and feed-covered left out)", got, want)
	}
	if got := OldestVerified(maps.All(all), 10, keep); len(got) != 5 {
		t.Fatalf("picked %v, want the 5 eligible", got)
	}
	if SpotGap(60) != time.Minute || SpotGap(0) != 0 {
		t.Fatal("spot gap")
	}
}
