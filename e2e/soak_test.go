package e2e

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/etcdtest"
)

var (
	soakDuration = flag.Duration("soak", 2*time.Minute, "TestSoak: how long faults and pushes go on (the CI run is the default)")
	soakSeed     = flag.Uint64("soak-seed", 0, "TestSoak: the seed of the faults and pushes (0: a random one, printed)")
	soakRepos    = flag.Int("soak-repos", 100, "TestSoak: upstream repositories listed in the catalog at the start")
	soakInterval = flag.Duration("soak-max-interval", 30*time.Second, "TestSoak: the nodes' --max-interval, which the convergence bound is derived from (a long run with many repositories on a loaded machine needs more)")
	soakEtcd     = flag.Bool("soak-etcd", false, "TestSoak: two coordinators on an etcd embedded in the test, the leader killed by the coordinator faults")
	soakPartialN = flag.Int("soak-partials", 5, "TestSoak: partial nodes (capacities 2, 1, 1, 0.5, 0.5, ...; the last with a small disk quota)")
)

// soakQuotaBytes is the smallest partial node's disk quota; the disk-fill
// fault writes a ballast of this size into its mirrors' directory, which
// the quota counts.
const soakQuotaBytes = 1 << 20

// TestSoak runs a whole fleet under pushes and random faults (process
// kills, partitions, latency, upstreams going away, catalog and API
// churn, webhook storms, a full disk) and checks from outside that
// nothing is lost: what the full node serves is always something the
// upstream had and never goes back, clones pass git fsck, every
// repository converges to its upstream once the faults stop, placement
// holds (one alive owner, each node's load within the bound) and no
// process grows without bound.
//
// go test ./e2e -run '^TestSoak$' -soak 20m -soak-repos 300 -v replays a
// run with -soak-seed N.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end soak")
	}
	seed := *soakSeed
	if seed == 0 {
		seed = rand.Uint64() >> 1
	}
	t.Logf("soak seed %d (replay with -soak-seed %d)", seed, seed)
	runStart := time.Now()
	st := soakSettings{maxInterval: *soakInterval, grace: 15 * time.Second, quota: "1MiB", partials: max(1, *soakPartialN)}
	if *soakEtcd {
		st.etcd = etcdtest.Start(t).Endpoint
	}
	nRepos := *soakRepos
	pool := nRepos + nRepos/5 // the rest are added by the catalog and the API

	ups := &soakUpstreams{dir: t.TempDir(), pushes: map[string]int{}}
	ups.link = newLink(t, "upstream", plainGitServer(t, ups.dir))
	began := time.Now()
	ups.repos = make([]*soakRepo, pool)
	// Four at a time: each is three git processes that mostly wait to start.
	var made sync.WaitGroup
	errs := make(chan error, pool)
	next := make(chan int)
	for range 4 {
		made.Go(func() {
			for i := range next {
				r, err := createSoakRepo(ups.dir, i)
				if err != nil {
					errs <- err
					continue
				}
				ups.repos[i] = r
			}
		})
	}
	for i := range pool {
		next <- i
	}
	close(next)
	made.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	t.Logf("soak: %d upstream repositories made in %v", pool, time.Since(began).Round(time.Millisecond))

	s := newSoakFleet(t, ups, st)
	for i := 0; i < nRepos; i++ {
		s.listed[i] = true
		s.yamlForm[i] = i%7 == 0 || soakForkDeclared(i)
	}
	if err := s.writeCatalog(fmt.Sprintf("%d repositories", nRepos)); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.roles() {
		s.start(r)
	}
	c := newSoakChecker(s)

	// Every repository is first mirrored without faults. The bound allows
	// a slow machine a second per repository and node.
	began = time.Now()
	initialBound := 2*st.maxInterval + time.Duration(nRepos)*2*time.Second
	eventually(t, initialBound, "every repository served with its upstream's refs", c.converged)
	initial := time.Since(began)

	stop := make(chan struct{})
	var loops sync.WaitGroup
	loop := func(f func()) { loops.Add(1); go func() { defer loops.Done(); f() }() }
	loop(func() { c.listLoop(stop, rand.New(rand.NewPCG(seed, 1))) })
	loop(func() { c.fsckLoop(stop, rand.New(rand.NewPCG(seed, 2)), t.TempDir()) })
	loop(func() { c.sampleLoop(stop) })
	loop(func() { c.nodesLoop(stop) })
	loop(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
			for _, crash := range s.crashed() {
				c.violate("%s", crash)
			}
		}
	})
	pushStop := make(chan struct{})
	var pushing sync.WaitGroup
	pushing.Add(1)
	go func() { defer pushing.Done(); soakPushes(t, s, c, pushStop, rand.New(rand.NewPCG(seed, 3)), pool) }()

	// The chaos.
	plan := planFaults(rand.New(rand.NewPCG(seed, 4)), *soakDuration, 4*time.Second, s.nodeNames(), s.coordNames(), nRepos)
	x := &soakChaos{s: s, c: c, rng: rand.New(rand.NewPCG(seed, 5)), pool: pool, counts: map[string]int{}}
	chaosStart := time.Now()
	x.run(plan)
	time.Sleep(time.Until(chaosStart.Add(*soakDuration)))
	close(pushStop)
	pushing.Wait()

	// The faults have stopped: every path heals, every process runs.
	links := append([]*link{ups.link, s.tunLink}, slices.Collect(maps.Values(s.upLinks))...)
	for _, ls := range s.toCoord {
		links = append(links, ls...)
	}
	for _, l := range links {
		l.heal()
	}
	for _, crash := range s.crashed() {
		c.violate("%s", crash)
	}
	convergeBound := 3*st.maxInterval + st.grace + time.Minute
	convergence, slowest, err := c.convergence(convergeBound)
	if err != nil {
		c.violate("not converged within %v of the faults' end: %v", convergeBound, err)
	}
	t.Logf("soak: converged in %v after the faults stopped (max-interval %v); the last wait was for: %v", convergence.Round(time.Millisecond), st.maxInterval, slowest)

	// Once converged, nothing is being fetched: the temporary directories
	// empty, the placement holds, resources are within their bounds.
	eventually(t, st.maxInterval, "no clone or quarantine left in the nodes' tmp", c.tmpLeft)
	eventually(t, st.grace+st.maxInterval, "each repository owned by one alive node", c.placement)
	// A node that handed repositories back when its disk was full and has
	// room again gets its share back by moves, which a loaded machine makes
	// slowly: the same time as convergence.
	eventually(t, convergeBound, "each node's load within the coordinator's bound", c.loadBound)
	var members int
	eventually(t, convergeBound, "each fork network owned by one node", func() error {
		var err error
		members, err = c.networksWhole()
		return err
	})
	eventually(t, convergeBound, "every mirror a bit-rot fault hit is repaired and clones whole", x.rotRepaired)
	t.Logf("soak: %d repositories in fork networks at the end", members)
	if members == 0 {
		c.violate("no repository is in a fork network at the end, though %d forks share a root", len(slices.DeleteFunc(seq(0, pool), func(i int) bool { return !soakFork(i) })))
	}
	close(stop)
	loops.Wait()
	c.sampleAll()
	c.checkResources(pool)

	var upBytes int64 = dirBytes(ups.dir)
	var kinds []string
	for _, k := range soakFaultKinds {
		kinds = append(kinds, fmt.Sprintf("%s:%d", k, x.counts[k]))
	}
	if s.etcd != "" {
		kinds = append(kinds, fmt.Sprintf("leader-killed:%d", x.counts["kill-leader"]))
	}
	var pushKinds []string
	total := 0
	for _, k := range slices.Sorted(maps.Keys(ups.pushes)) {
		pushKinds = append(pushKinds, fmt.Sprintf("%s:%d", k, ups.pushes[k]))
		total += ups.pushes[k]
	}
	want, _ := s.desired()
	for _, role := range s.roles() {
		pk, last := c.peak[role], c.last[role]
		t.Logf("soak: %-11s peak rss %d MiB, threads %d, fds %d, disk %d KiB; at the end %d MiB, %d, %d, %d KiB (upstreams %d KiB)",
			role, pk.rssKiB>>10, pk.threads, pk.fds, pk.disk>>10, last.rssKiB>>10, last.threads, last.fds, last.disk>>10, upBytes>>10)
	}
	for _, e := range x.errs {
		t.Logf("soak: fault not injected as planned: %s", e)
	}
	for _, v := range c.violations {
		t.Logf("soak violation: %s", v)
	}
	summary := fmt.Sprintf("SOAK seed=%d duration=%v (whole run %v) fleet=[%s] repos=%d (pool %d, served at the end %d) pushes=%d [%s] faults=%d [%s] initial-mirror=%v longest-convergence=%v (max-interval %v) listings=%d fscks=%d violations=%d",
		seed, soakDuration.String(), time.Since(runStart).Round(time.Second), s.describe(), nRepos, pool, len(want), total, strings.Join(pushKinds, " "),
		len(plan), strings.Join(kinds, " "), initial.Round(time.Second), convergence.Round(time.Second), st.maxInterval, c.listings, c.fscks, c.nViolation)
	t.Log(summary)
	if path := os.Getenv("GITFLEET_SOAK_SUMMARY"); path != "" {
		_ = os.WriteFile(filepath.Clean(path), []byte(summary+"\n"), 0o644)
	}
	if dir := os.Getenv("GITFLEET_SOAK_LOGS"); dir != "" {
		if err := s.keepLogs(dir); err != nil {
			t.Errorf("keep the logs: %v", err)
		}
	}
	if c.nViolation > 0 {
		t.Errorf("%d violations (replay with -soak-seed %d)", c.nViolation, seed)
	}
}

// soakPushes pushes to the upstreams until stop: about two pushes a second,
// and every 15-30 s a burst of 20 on a few repositories. Every fifth
// repository has a webhook, delivered after each push to it.
func soakPushes(t testing.TB, s *soakFleet, c *soakChecker, stop <-chan struct{}, rng *rand.Rand, pool int) {
	nextBurst := time.Now().Add(time.Duration(15+rng.IntN(15)) * time.Second)
	n := 0
	one := func(i int) {
		r := s.ups.repos[i]
		kind, err := r.push(rng)
		if err != nil {
			t.Errorf("soak: push to %s: %v", r.name, err)
			return
		}
		if kind == "" {
			return // away
		}
		s.ups.countPush(kind)
		if i%5 == 0 {
			n++
			_ = s.hook(i, r.current()["refs/heads/main"], fmt.Sprintf("push-%d-%d", i, n))
		}
	}
	for {
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
		one(rng.IntN(pool))
		if time.Now().After(nextBurst) {
			few := pick(rng, seq(0, pool), 4)
			for k := 0; k < 20; k++ {
				one(few[k%len(few)])
			}
			nextBurst = time.Now().Add(time.Duration(15+rng.IntN(15)) * time.Second)
		}
	}
}

// checkResources holds each process to bounds derived from the fleet's
// size: a leak of a file, a thread or memory per check would pass them
// within a run.
func (c *soakChecker) checkResources(pool int) {
	upBytes := dirBytes(c.s.ups.dir)
	for _, role := range c.s.roles() {
		last := c.last[role]
		if last.fds > int64(128+pool) {
			c.violate("%s holds %d open files at the end (bound %d)", role, last.fds, 128+pool)
		}
		if last.threads > 200 {
			c.violate("%s runs %d threads at the end (bound 200)", role, last.threads)
		}
		if last.rssKiB > 512<<10 {
			c.violate("%s uses %d MiB of memory at the end (bound 512)", role, last.rssKiB>>10)
		}
		if bound := 8*upBytes + 64<<20; last.disk > bound {
			c.violate("%s's data directory holds %d KiB at the end (bound %d KiB: 8x the upstreams and 64 MiB)", role, last.disk>>10, bound>>10)
		}
	}
}
