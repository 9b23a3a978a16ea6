package gitserve

import (
	"fmt"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// The memory of advertised tips is bounded: full, it keeps no new tip
// until old ones expire, and it forgets each tip after the grace.
func TestRecentTipsAreBoundedAndExpire(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	r := newRecentTips(clk, 30*time.Second)
	oid := func(i int) string { return fmt.Sprintf("%040x", i) }
	for repo := 0; repo < maxTips/maxTipsPerRepo; repo++ {
		var tips []string
		for i := range maxTipsPerRepo {
			tips = append(tips, oid(repo*maxTipsPerRepo+i))
		}
		r.record(fmt.Sprint("repo", repo), tips)
	}
	if r.n != maxTips {
		t.Fatalf("%d tips kept, want %d", r.n, maxTips)
	}
	r.record("late", []string{oid(maxTips + 1)})
	if r.advertised("late", oid(maxTips+1)) || r.n != maxTips {
		t.Fatalf("a full memory kept a new tip (%d tips)", r.n)
	}
	if !r.advertised("repo0", oid(0)) || r.advertised("repo1", oid(0)) {
		t.Fatal("a tip is known under its own repository only")
	}
	clk.Advance(31 * time.Second)
	if r.advertised("repo0", oid(0)) {
		t.Fatal("a tip older than the grace is still served")
	}
	r.record("late", []string{oid(maxTips + 1)})
	if !r.advertised("late", oid(maxTips+1)) || r.n != 1 || len(r.repos) != 1 {
		t.Fatalf("after the grace: %d tips in %d repositories, want only the late one", r.n, len(r.repos))
	}
}
