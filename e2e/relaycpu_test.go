package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// cpuTicks is the CPU time of process pid and of the children it waited
// for (git's runs), in clock ticks: utime+stime+cutime+cstime of
// /proc/<pid>/stat.
func cpuTicks(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), ") ") // the name may hold spaces
	f := strings.Fields(rest)                  // f[0] is field 3 (state)
	var sum int64
	for _, i := range []int{14, 15, 16, 17} {
		n, err := strconv.ParseInt(f[i-3], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	return sum
}

// BenchmarkRelayedCloneCPU measures the CPU a clone costs the full node
// that holds the repository, cloned from it directly and relayed through a
// full node that does not hold it, and the relaying node's own CPU:
// alternated runs, medians. The repository is the bare repository at
// $GITFLEET_RELAY_BENCH_REPO (e.g. a copy of etcd-io/bbolt), served as an
// upstream on 127.0.0.1. Run it with -benchtime=1x.
func BenchmarkRelayedCloneCPU(b *testing.B) {
	src := os.Getenv("GITFLEET_RELAY_BENCH_REPO")
	if src == "" && !testing.Short() {
		b.Skip("set GITFLEET_RELAY_BENCH_REPO to a bare repository (under -short: a small one of its own)")
	}
	f := newFleet(b)
	if src == "" {
		if err := f.up.Create("bench/repo", []string{"main"}, []string{"v1"}); err != nil {
			b.Fatal(err)
		}
	} else if err := gittest.Git("", "clone", "-q", "--bare", "--no-local", src, filepath.Join(f.up.Dir, "bench", "repo.git")); err != nil {
		b.Fatal(err)
	}
	key := f.keyOf("bench/repo")
	f.writeFile("lists/bench.list", f.up.RepoURL("bench/repo")+"\n")
	f.commitCatalog("the benchmark's repository")
	f.coordArgs = []string{"--full-replicas", "2"}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(b)
	bases := map[string]string{"full-a": f.base, "full-b": "http://" + freeAddr(b), "full-c": "http://" + freeAddr(b)}
	tunnels := map[string]string{"full-a": f.tunnelAddr, "full-b": freeAddr(b), "full-c": freeAddr(b)}
	for _, name := range []string{"full-a", "full-b", "full-c"} {
		f.startNode(name, "full", "--http", bases[name][len("http://"):], "--tunnel", tunnels[name], "--api-token", apiToken,
			"--capacity", "0")
	}
	f.startNode("partial-1", "partial")
	var holder, relay string
	eventually(b, 10*time.Minute, "the repository is on its replicas", func() error {
		ids, err := fullNodeIDs(f.base)
		if err != nil {
			return err
		}
		replicas, err := tierReplicas(b, f.base, 1)
		if err != nil {
			return err
		}
		r := replicas[key]
		if len(ids) != 3 || len(r) != 2 {
			return fmt.Errorf("full nodes %v, replicas %v", ids, r)
		}
		for name, id := range ids {
			switch {
			case id == r[0]:
				holder = name
			case !slices.Contains(r, id):
				relay = name
			}
		}
		for _, name := range []string{"full-a", "full-b", "full-c"} {
			if err := func() error {
				_, err := lsRemote(bases[name] + "/" + key + ".git")
				return err
			}(); err != nil {
				return err
			}
		}
		if _, err := os.Stat(filepath.Join(f.dataDir(holder), "repos", key+".git")); err != nil {
			return err
		}
		return nil
	})
	clone := func(base string) {
		dir := filepath.Join(b.TempDir(), "clone")
		if err := gittest.Git("", "clone", "-q", "--mirror", base+"/"+key+".git", dir); err != nil {
			b.Fatal(err)
		}
		if err := gittest.Git(dir, "fsck", "--connectivity-only"); err != nil {
			b.Fatal(err)
		}
		_ = os.RemoveAll(dir)
	}
	hp, rp := f.procs[holder].cmd.Process.Pid, f.procs[relay].cmd.Process.Pid
	clone(bases[holder]) // the first clone of each kind warms what it warms
	clone(bases[relay])
	const runs = 5
	var direct, viaHolder, viaRelay []int64
	for range runs {
		h0 := cpuTicks(b, hp)
		clone(bases[holder])
		direct = append(direct, cpuTicks(b, hp)-h0)
		h0, r0 := cpuTicks(b, hp), cpuTicks(b, rp)
		clone(bases[relay])
		viaHolder, viaRelay = append(viaHolder, cpuTicks(b, hp)-h0), append(viaRelay, cpuTicks(b, rp)-r0)
	}
	med := func(s []int64) float64 { s = slices.Sorted(slices.Values(s)); return float64(s[len(s)/2]) / 100 } // ticks of 10 ms
	b.ReportMetric(med(direct), "holder-cpu-s/direct-clone")
	b.ReportMetric(med(viaHolder), "holder-cpu-s/relayed-clone")
	b.ReportMetric(med(viaRelay), "relay-cpu-s/relayed-clone")
	b.Logf("holder %s, relay %s; CPU ticks (10 ms) direct %v, relayed: holder %v relay %v", holder, relay, direct, viaHolder, viaRelay)
}
