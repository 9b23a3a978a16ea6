package fullnode

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/pullplan"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
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

// The full node's gate: above the mark a first pull is refused once and
// waits, without retry, also when new states arrive; a measure below the
// mark puts it back in the queue. With refuse-all a held key waits too.
func TestFullNodeWaitsForDiskRoom(t *testing.T) {
	for _, policy := range []string{FullDiskRefuseNew, FullDiskRefuseAll} {
		t.Run(policy, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1e9, 0))
			f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), Fetchers: 1,
				DiskQuota: 1000}, FullDiskPolicy: policy}, slog.New(slog.DiscardHandler), clk)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.n.TestHooks().Close)
			const fresh, held = "h.example/a/new", "h.example/a/held"
			f.n.TestHooks().Hold(map[repokey.Key]string{held: "old"})
			state := func(ms int64) {
				f.states([]*fleetv1.RepoState{
					{Key: fresh, Url: "https://" + fresh, Owner: 99, State: "ok", Digest: "d1", LastCheckMs: ms},
					{Key: held, Url: "https://" + held, Owner: 99, State: "ok", Digest: "d2", LastCheckMs: ms}})
			}
			state(1e12)
			ballast := filepath.Join(f.mirror.Root(), "ballast")
			if err := os.WriteFile(ballast, make([]byte, 900), 0o644); err != nil {
				t.Fatal(err)
			}
			f.measureDisk()
			if _, _, full, _ := f.diskFigures(); !full {
				t.Fatal("900 of 1000 bytes is not above the high water")
			}
			admitted := map[string]bool{}
			for {
				k, _, _, ok := f.nextPull(clk.Now())
				if !ok {
					break
				}
				if done, ok := f.admit(k); ok {
					admitted[string(k)] = true
					done()
					f.mu.Lock()
					f.plan.Ended(k, "", pullplan.Stopped, clk.Now())
					f.mu.Unlock()
				}
			}
			if admitted[fresh] {
				t.Error("a first pull was started above the high water")
			}
			if admitted[held] != (policy == FullDiskRefuseNew) {
				t.Errorf("update of a held repository admitted %v", admitted[held])
			}
			f.mu.Lock()
			st := f.view.Get(fresh)
			f.mu.Unlock()
			if r := f.backend.repo(fresh, st, clk.Now()); r.Served || r.LastError != fullDiskError {
				t.Errorf("waiting repository shown as %+v", r)
			}
			state(2e12) // the owner checked again: no retry
			if k, _, _, ok := f.nextPull(clk.Now()); ok && k == fresh {
				t.Fatal("a repository waiting for disk room was queued again by a new state")
			}
			if err := os.Remove(ballast); err != nil {
				t.Fatal(err)
			}
			f.measureDisk() // measured at most every 10 s: still full
			if _, _, full, _ := f.diskFigures(); !full {
				t.Fatal("the disk was measured again within 10 s")
			}
			clk.Advance(10 * time.Second)
			f.measureDisk()
			if _, _, full, waiting := f.diskFigures(); full || waiting != 0 {
				t.Fatalf("below the mark: full %v, %d waiting", full, waiting)
			}
			if k, _, _, ok := f.nextPull(clk.Now()); !ok || (k != fresh && k != held) {
				t.Fatal("a repository that waited for room was not queued again")
			}
		})
	}
}

// A full node that owns a repository (a ring member, as in `gitfleet up`)
// clones it from its upstream only below the high water: above it, the
// fetch is not started, the repository waits for room out of the
// scheduler (no retry), and a measure below the mark schedules it again.
func TestFullNodeOwnCloneWaitsForDiskRoom(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), Fetchers: 1,
		DiskQuota: 1000, AllowPrivate: true}}, slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	nd := f.n.TestHooks()
	t.Cleanup(nd.Close)
	ballast := filepath.Join(f.mirror.Root(), "ballast")
	if err := os.WriteFile(ballast, make([]byte, 900), 0o644); err != nil {
		t.Fatal(err)
	}
	f.measureDisk()
	if _, _, full, _ := f.diskFigures(); !full {
		t.Fatal("900 of 1000 bytes is not above the high water")
	}

	// Nothing listens on port 1: a clone that started would fail at once
	// and report it.
	const key = "127.0.0.1:1/a/own"
	nd.Assign(&fleetv1.Repo{Key: key, Url: "http://" + key + ".git"})
	due, ok := nd.Due()
	if !ok || due != key {
		t.Fatalf("the new repository is not due: %q %v", due, ok)
	}
	nd.Check(context.Background(), key)
	r, reported := nd.Result(key)
	if reported {
		t.Fatalf("a clone was started above the high water: %v", r)
	}
	if !f.diskWaiting(key) {
		t.Error("the repository does not wait for disk room")
	}
	if _, _, _, waiting := f.diskFigures(); waiting != 1 {
		t.Errorf("%d repositories wait for room, want 1", waiting)
	}
	clk.Advance(time.Hour)
	if k, ok := nd.Due(); ok {
		t.Fatalf("%s was scheduled while the disk is above the high water", k)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second) // the quota's disk is measured at most every 10 s
	f.measureDisk()
	if f.diskWaiting(key) {
		t.Error("still waiting below the mark")
	}
	if due, ok := nd.Due(); !ok || due != key {
		t.Fatalf("below the mark the repository is not due: %q %v", due, ok)
	}
}
