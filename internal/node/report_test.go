package node

import (
	"io"
	"log/slog"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/schedule"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

func newTestNode() *Node {
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil)), clk: clock.NewFake(time.Unix(1e9, 0)),
		results: map[string]*fleetv1.CheckResult{}, sendNow: make(chan struct{}, 1)}
	n.role = partial{n}
	return n
}

// Bug seen: an on-demand task stayed running after its check had
// finished: a second check of the same repository (a webhook's, queued
// behind it) ended before the results were sent, and its result replaced
// the first one with the task's ID.
func TestANewerResultKeepsTheTasksOfTheOneItReplaces(t *testing.T) {
	n := newTestNode()
	n.Report(&fleetv1.CheckResult{Key: "h/a", Ok: true, Digest: "d1", TaskIds: []string{"task-1"}})
	n.Report(&fleetv1.CheckResult{Key: "h/a", Ok: true, Digest: "d2"})
	got := n.results["h/a"]
	if got.GetDigest() != "d2" {
		t.Fatalf("digest = %s, want the newer d2", got.GetDigest())
	}
	if !reflect.DeepEqual(got.GetTaskIds(), []string{"task-1"}) {
		t.Fatalf("tasks = %v, want [task-1]: the first check's task would never finish", got.GetTaskIds())
	}
	n.Report(&fleetv1.CheckResult{Key: "h/a", Ok: true, Digest: "d3", TaskIds: []string{"task-2", "task-1"}})
	if got := n.results["h/a"].GetTaskIds(); !reflect.DeepEqual(got, []string{"task-1", "task-2"}) {
		t.Fatalf("tasks = %v, want each once", got)
	}
}

// Bug seen: a restarted worker that no longer accepted a stored
// repository's URL skipped it with a log line only, and the repository
// went stale with no error anywhere.
func TestARefusedAssignmentIsReportedAsAnError(t *testing.T) {
	n := newTestNode()
	n.assign(&fleetv1.Repo{Key: "127.0.0.1/a/b", Url: "http://127.0.0.1/a/b.git"}) // private: refused
	r := n.results["127.0.0.1/a/b"]
	if r == nil || r.GetOk() || r.GetErrorClass() != "refused" || r.GetError() == "" || r.GetClass() != uint32(repostate.ClassBlocked) {
		t.Fatalf("result = %v, want a refused error", r)
	}
	if len(n.owned) != 0 {
		t.Fatal("a refused repository was taken")
	}
}

// Bug seen: a repository added through the API stayed pending (no owner)
// until a background check much later: the node that was given it already
// held a mirror of it, so it went to the background lane, while the
// coordinator waited for a check to confirm the node as its owner.
func TestAnAssignedRepositoryHeldOnDiskIsCheckedAtOnce(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ms, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sched, err := schedule.New(schedule.Config{MaxInterval: 24 * time.Hour, MinInterval: time.Minute}, clk)
	if err != nil {
		t.Fatal(err)
	}
	n := newTestNode()
	n.clk, n.mirror, n.sched = clk, ms, sched
	n.owned, n.digests, n.meta = map[string]*owned{}, map[repokey.Key]string{}, map[string]*repoMeta{}
	n.cfg.AllowPrivate = true
	key := "127.0.0.1/a/b"
	if err := os.MkdirAll(ms.Path(repokey.Key(key)), 0o755); err != nil {
		t.Fatal(err)
	}
	n.digests[repokey.Key(key)] = "0123456789abcdef0123456789abcdef" // held, with refs known
	n.assign(&fleetv1.Repo{Key: key, Url: "http://127.0.0.1/a/b.git"})
	got, ok, wait := sched.Next()
	if !ok || got.String() != key {
		t.Fatalf("Next = %q, %v (wait %v), want %s at once", got, ok, wait, key)
	}
}
