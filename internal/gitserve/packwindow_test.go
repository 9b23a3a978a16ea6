package gitserve_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitserve"
)

// windowFixture serves the fixture's repository with a pack cache whose
// window (the default, 2s) runs on a fake clock.
func windowFixture(t *testing.T) (*fixture, *clock.Fake, []byte) {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	f := newFixture(t, func(h *gitserve.Handler) {
		h.Clock = clk
		cached(t, 1<<30, nil)(h)
	})
	tip := addBlobCommit(t, f.repo, "main", 256<<10, 7)
	return f, clk, v2Fetch("want "+tip, "ofs-delta", "filter blob:none", "done")
}

func (f *fixture) mustPost(t *testing.T, body []byte) {
	t.Helper()
	if code, _, resp := f.post(t, body, v2); code != http.StatusOK {
		t.Fatalf("fetch: %d %q", code, resp)
	}
}

// A blob:none clone that nobody else asks for goes to its client and is
// dropped: it is not checked nor kept, and the same request after the
// window runs again.
func TestAFilteredCloneNobodyElseAsksForIsNotKept(t *testing.T) {
	f, clk, body := windowFixture(t)
	f.mustPost(t, body)
	if s := f.h.Cache.Stats(); s.Runs != 1 || s.Unkept != 1 || s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("after one blob:none clone: %+v, want 1 run, not kept, no entry, no bytes", s)
	}
	clk.Advance(gitserve.DefaultCacheWindow + time.Second)
	f.mustPost(t, body)
	if s := f.h.Cache.Stats(); s.Runs != 2 || s.Hits != 0 || s.Unkept != 2 || s.Entries != 0 {
		t.Fatalf("the same clone after the window: %+v, want a second run, not kept either", s)
	}
}

// The same request within the window is kept, and a third one is served
// from it.
func TestAFilteredCloneAskedForAgainWithinTheWindowIsKept(t *testing.T) {
	f, clk, body := windowFixture(t)
	f.mustPost(t, body)
	clk.Advance(gitserve.DefaultCacheWindow / 2)
	f.mustPost(t, body)
	if s := f.h.Cache.Stats(); s.Runs != 2 || s.Unkept != 1 || s.Entries != 1 {
		t.Fatalf("a second blob:none clone within the window: %+v, want 2 runs, the second kept", s)
	}
	f.mustPost(t, body)
	if s := f.h.Cache.Stats(); s.Runs != 2 || s.Hits != 1 {
		t.Fatalf("a third: %+v, want it served from the kept answer", s)
	}
}

// Eight identical blob:none clones arriving together share one run, which
// is kept.
func TestEightIdenticalFilteredClonesShareOneRunThatIsKept(t *testing.T) {
	f, _, body := windowFixture(t)
	release, _ := holdRuns(f.h)
	defer release()
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if code, _, resp := f.post(t, body, v2); code != http.StatusOK {
				t.Errorf("fetch: %d %q", code, resp)
			}
		})
	}
	waitFor(t, "8 clones on one run", func() bool { return f.h.Cache.Stats().Watching == n })
	release()
	wg.Wait()
	if s := f.h.Cache.Stats(); s.Runs != 1 || s.Shared != n-1 || s.Unkept != 0 || s.Entries != 1 {
		t.Fatalf("8 identical blob:none clones: %+v, want 1 run shared by 7, kept", s)
	}
}
