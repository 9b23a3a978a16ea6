package node

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/schedule"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Bug seen at 100,000 repositories: the coordinator sends an on-demand
// check at once but the assignments of a new catalog in batches, so the
// check of a repository whose assignment had not arrived yet was dropped,
// and its task waited out its time. Now the check is kept until the
// assignment comes, and goes ahead of the first clones queued before it.
func TestACheckAskedBeforeItsAssignmentIsKept(t *testing.T) {
	n := newTestNode()
	st, err := mirror.Open(t.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), n.log)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := schedule.New(schedule.Config{Concurrency: 10}, n.clk)
	if err != nil {
		t.Fatal(err)
	}
	n.mirror, n.sched = st, sched
	n.owned, n.early, n.meta, n.metaDirty = map[string]*owned{}, map[string][]string{}, map[string]*repoMeta{}, map[repokey.Key]bool{}
	n.wakeup = make(chan struct{}, 1)
	repo := func(i int) *fleetv1.Repo {
		return &fleetv1.Repo{Key: fmt.Sprintf("example.org/g/r%03d", i), Url: fmt.Sprintf("https://example.org/g/r%03d", i)}
	}
	for i := range 100 {
		n.assign(repo(i))
	}
	late := repo(100)
	n.checkNow(late.Key, "task-1")
	n.checkNow(late.Key, "") // a webhook's, without a task
	n.assign(late)
	if key, ok, _ := n.sched.Next(); !ok || key.String() != late.Key {
		t.Fatalf("Next() = %q, %v; want the repository asked for, ahead of 100 first clones", key, ok)
	}
	if got := n.owned[late.Key].taskIDs; !reflect.DeepEqual(got, []string{"task-1"}) {
		t.Fatalf("tasks = %v, want [task-1]", got)
	}
	if len(n.early) != 0 {
		t.Fatalf("%d early checks left", len(n.early))
	}
}
