package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	bolt "github.com/gitfleet/gitfleet/internal/store"
)

// A node's maintainer, given a mirror that was just cloned, maintains
// it once (a full run: its first), counts the run in /metrics and records
// it in the fetch log; noted again with nothing new, it is
// probed and left alone; a key with no mirror is forgotten.
func TestMaintainerRunsANotedMirrorOnceAndCountsIt(t *testing.T) {
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("m", []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), log)
	if err != nil {
		t.Fatal(err)
	}
	nk, _, err := repokey.Normalize(up.RepoURL("m"), repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	key := nk.String()
	if _, err := store.Sync(context.Background(), repokey.Key(key), up.RepoURL("m")); err != nil {
		t.Fatal(err)
	}
	// A first mirror is maintained as it is made: make it what an upgrade
	// finds of a mirror cloned before that, which owes a full run.
	dir := store.Path(repokey.Key(key))
	stale, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "multi-pack-index*"))
	bitmaps, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.bitmap"))
	for _, f := range append(append(stale, bitmaps...), filepath.Join(dir, "gitfleet-maintained")) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"commit-graph", "commit-graphs"} {
		if err := os.RemoveAll(filepath.Join(dir, "objects", "info", d)); err != nil {
			t.Fatal(err)
		}
	}
	db, err := bolt.OpenBolt(filepath.Join(t.TempDir(), "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	n := &Node{log: log, clk: clock.Real{}, mirror: store, maint: newMaintainer(1, 1, 7*24*time.Hour),
		flog: fetchlog.New(db, fetchlog.Config{}, clock.Real{}, log)}
	n.role = partial{n}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.maintainLoop(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	settled := func(what string, runs uint64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for n.maint.runs.Load() < runs || n.maintCandidates() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d runs, %d candidates after a minute", what, n.maint.runs.Load(), n.maintCandidates())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	n.maint.note(repokey.Key(key))
	settled("a mirror cloned before first mirrors were maintained", 1)
	sh, err := store.Probe(repokey.Key(key))
	if err != nil {
		t.Fatal(err)
	}
	if !sh.Bitmap || !sh.CommitGraph || sh.LastFull.IsZero() {
		t.Fatalf("after the maintainer's run: %+v, want a bitmap, a commit graph, a full run recorded", sh)
	}
	want := `
# HELP gitfleet_maintenance_candidates Mirrors waiting to be probed or maintained.
# TYPE gitfleet_maintenance_candidates gauge
gitfleet_maintenance_candidates 0
# HELP gitfleet_maintenance_failures_total Maintenance runs that failed.
# TYPE gitfleet_maintenance_failures_total counter
gitfleet_maintenance_failures_total 0
# HELP gitfleet_maintenance_runs_total Maintenance runs of mirrors (repack, bitmap, commit graph), by kind (full, incremental).
# TYPE gitfleet_maintenance_runs_total counter
gitfleet_maintenance_runs_total{kind="full"} 1
gitfleet_maintenance_runs_total{kind="incremental"} 0
`
	if err := testutil.CollectAndCompare(maintenanceCollector{n.maint}, strings.NewReader(want),
		"gitfleet_maintenance_candidates", "gitfleet_maintenance_failures_total", "gitfleet_maintenance_runs_total"); err != nil {
		t.Error(err)
	}
	if err := n.flog.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, _, err := n.flog.List(context.Background(), fetchlog.Query{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || h[0].Kind != "maintenance" || h[0].Result != fetchlog.ResultOK || h[0].Error != "" {
		t.Fatalf("log %+v, want one maintenance entry without error", h)
	}

	n.maint.note(repokey.Key(key)) // read whole by an integrity check: nothing new
	n.maint.note("127.0.0.1/no/such-mirror")
	settled("nothing new", 1)
	if got := n.maint.runs.Load(); got != 1 || n.maint.failures.Load() != 0 {
		t.Fatalf("%d runs, %d failures after noting a maintained mirror and a missing one; want 1, 0", got, n.maint.failures.Load())
	}
}

// maintCandidates is how many mirrors wait for a probe or a lane, or are
// being maintained.
func (n *Node) maintCandidates() int {
	n.maint.mu.Lock()
	defer n.maint.mu.Unlock()
	return n.maint.plan.candidates() + len(n.maint.plan.running)
}
