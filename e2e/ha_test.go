package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/gitfleet/gitfleet/internal/etcdtest"
)

// leads is how many times a coordinator's log says it was elected.
func leads(p *proc) int { return p.count("elected leader") }

// logSays waits until p's log holds s.
func logSays(t *testing.T, p *proc, s string) {
	t.Helper()
	eventually(t, 60*time.Second, p.name+" says "+s, func() error {
		if p.count(s) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
}

// Two coordinators share one fleet through a real etcd. Nodes given both
// addresses find the leader (those that call the follower first are sent
// on). When the leader is killed, the other takes over from the shared
// state within the lease: no repository moves, nothing is cloned again,
// pushes keep arriving, and API writes and catalog changes go through the
// new leader. The old leader, restarted, waits as a follower. Both
// leaders compact etcd's history every second meanwhile.
func TestCoordinatorFailoverThroughEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	etcd := etcdtest.Start(t)
	f := newFleet(t)
	repos := seq(0, 12)
	f.seed(repos, "12 repositories")
	addrA, addrB := freeAddr(t), freeAddr(t)
	startCoordinator := func(name, addr string) *proc {
		args := append([]string{"coordinator", "--data", f.dataDir(name), "--catalog", f.catalog, "--grpc", addr,
			"--etcd", etcd.Endpoint, "--etcd-prefix", "/e2e-fleet", "--etcd-lease", "3s", "--etcd-compaction", "1s",
			"--grace", "60s", "--warmup", "3s", "--warmup-nodes", "3", "--catalog-interval", "1s", "--full-token", f.fullToken}, f.common()...)
		p := start(t, name, args...)
		f.procs[name] = p
		return p
	}
	a := startCoordinator("coord-a", addrA)
	logSays(t, a, "elected leader")
	b := startCoordinator("coord-b", addrB)
	logSays(t, b, "candidate leader")
	// The nodes know both; the full node and one partial node call the
	// follower first.
	f.grpc = addrB + "," + addrA
	f.tunnelAddr = freeAddr(t)
	f.startFull()
	f.startNode("partial-1", "partial")
	f.grpc = addrA + "," + addrB
	f.startNode("partial-2", "partial")
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	if leads(b) != 0 {
		t.Fatal("coord-b was elected while coord-a led")
	}
	if f.procs["full"].count("going to the leader") == 0 {
		t.Error("the full node, sent to the follower first, did not say it went to the leader")
	}
	before, err := owners(f, repos)
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := f.procs["partial-1"], f.procs["partial-2"]
	c1, c2 := clones(p1), clones(p2)
	if c1+c2 == 0 {
		t.Fatal("the partial nodes' logs show no clones at all: the count below would prove nothing")
	}

	a.kill()
	killed := time.Now()
	eventually(t, 30*time.Second, "coord-b takes over and every node's session moves to it", func() error {
		if leads(b) == 0 {
			return errors.New("coord-b is not elected yet")
		}
		if b.count("session opened") < 3 {
			return errors.New("not every node has a session with coord-b yet")
		}
		return nil
	})
	// With a 3 s lease: the figure in docs/benchmarks.md.
	t.Logf("failover: the leader killed, every node in session with the new one after %v", time.Since(killed).Round(10*time.Millisecond))
	if _, err := f.up.Commit(f.name(3), "main"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "pushes arrive after the failover", func() error { return f.servedLikeUpstream(repos) })
	nothingMovedOrRecloned(t, f, repos, before, p1, p2, c1, c2, "the failover")
	if b.count("warming up again") > 0 {
		t.Error("the new leader did not resume from the shared state")
	}

	// Writes reach the new leader: an API addition and a catalog change.
	api := f.base + "/api/v1"
	if err := f.up.Create("ha/added-by-api", []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	addedURL := f.up.RepoURL("ha/added-by-api")
	if code := call(t, "POST", api+"/repos", apiToken, strings.NewReader(`{"url":"`+addedURL+`"}`), nil); code != 201 {
		t.Fatalf("add through the API after the failover: %d", code)
	}
	more := seq(0, 14)
	for _, i := range more[12:] {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(more, "two more")
	eventually(t, 60*time.Second, "API and catalog additions served", func() error {
		if _, err := lsRemote(f.base + "/" + strings.TrimSuffix(strings.TrimPrefix(addedURL, "http://"), ".git") + ".git"); err != nil {
			return err
		}
		return f.servedLikeUpstream(more)
	})

	// The old leader comes back as a follower: the fleet stays with b.
	a = startCoordinator("coord-a", addrA)
	// It says it waits as a candidate (however long a busy machine takes
	// to start it), and its candidacy is in etcd, queued behind coord-b's:
	// the election's oldest key, its leader, is still coord-b's.
	logSays(t, a, "candidate leader")
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	eventually(t, 30*time.Second, "coord-a's candidacy queued behind coord-b's leadership", func() error {
		resp, err := client.Get(context.Background(), "/e2e-fleet/leader/", clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			return err
		}
		var candidates []string
		for _, kv := range resp.Kvs {
			candidates = append(candidates, string(kv.Value))
		}
		if !slices.Equal(candidates, []string{addrB, addrA}) {
			return fmt.Errorf("candidates in etcd, oldest first: %v; want coord-b (%s), then coord-a (%s)", candidates, addrB, addrA)
		}
		return nil
	})
	if n := leads(a); n != 0 {
		t.Errorf("the restarted coord-a took the leadership from a live leader (%d elections)", n)
	}

	// The leaders compacted etcd's history: its first revisions are gone.
	if _, err := client.Get(context.Background(), "/e2e-fleet/", clientv3.WithPrefix(), clientv3.WithRev(2)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("a read of etcd's second revision: %v, want compacted", err)
	}
}
