package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// soakChecker holds the fleet to its promises, from outside: what the full
// node serves (git ls-remote and clones checked by git fsck against the
// upstreams' recorded history), what the API says of placement, and what
// /proc and the disk say of each process.
type soakChecker struct {
	s *soakFleet

	mu         sync.Mutex
	violations []string
	nViolation int
	lastPos    map[string]int // repository index and ref -> position in the ref's history last served
	listings   int
	fscks      int
	cloneFails int
	peak       map[string]soakSample // by role
	last       map[string]soakSample
	accused    map[string]uint64 // forged tips the full node last counted against each node
}

// soakSample is one process's resources at one moment.
type soakSample struct {
	rssKiB  int64
	threads int64
	fds     int64
	disk    int64 // bytes in the role's data directory
}

func newSoakChecker(s *soakFleet) *soakChecker {
	return &soakChecker{s: s, lastPos: map[string]int{}, peak: map[string]soakSample{}, last: map[string]soakSample{},
		accused: map[string]uint64{}}
}

// violate records a broken promise (the first 50 are kept for the report).
func (c *soakChecker) violate(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nViolation++
	if len(c.violations) < 50 {
		c.violations = append(c.violations, time.Now().UTC().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
	c.s.t.Logf("VIOLATION: "+format, args...)
}

// checkRefs holds the refs the full node served for repository i to the
// upstream's history: each value must be one the upstream gave that ref,
// and never an older one than served before (unless the upstream itself
// went back to it, which records it again, later).
func (c *soakChecker) checkRefs(i int, refs map[string]string, via string) {
	r := c.s.ups.repos[i]
	for ref, oid := range refs {
		pos := r.position(ref, oid)
		if pos < 0 {
			c.violate("%s: %s serves %s=%s, which the upstream never had", c.s.ups.key(i), via, ref, oid)
			continue
		}
		k := strconv.Itoa(i) + " " + ref
		c.mu.Lock()
		prev, seen := c.lastPos[k]
		if !seen || pos > prev {
			c.lastPos[k] = pos
		}
		c.mu.Unlock()
		if seen && pos < prev {
			h := r.history(ref)
			c.violate("%s: %s serves %s=%s (value %d of its history) after serving %s (value %d): it went backwards",
				c.s.ups.key(i), via, ref, oid, pos, h[prev], prev)
		}
	}
}

// listLoop lists the refs the full node serves for one repository after
// another, in a random order, until stop is closed.
func (c *soakChecker) listLoop(stop <-chan struct{}, rng *rand.Rand) {
	for {
		want, _ := c.s.desired()
		rng.Shuffle(len(want), func(a, b int) { want[a], want[b] = want[b], want[a] })
		for _, i := range want {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			refs, err := c.s.served(i)
			if err != nil || refs == nil {
				continue // the full node is down or does not serve it yet: not a lie
			}
			c.checkRefs(i, refs, "ls-remote")
			c.mu.Lock()
			c.listings++
			c.mu.Unlock()
		}
		if len(want) == 0 {
			time.Sleep(time.Second)
		}
	}
}

// fsckLoop clones a random repository from the full node every few seconds
// and checks the clone with git fsck --strict.
func (c *soakChecker) fsckLoop(stop <-chan struct{}, rng *rand.Rand, tmp string) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-time.After(3 * time.Second):
		}
		want, _ := c.s.desired()
		if len(want) == 0 {
			continue
		}
		i := want[rng.IntN(len(want))]
		dir := filepath.Join(tmp, fmt.Sprintf("clone-%d", n))
		c.fsckClone(i, dir)
		_ = os.RemoveAll(dir)
	}
}

func (c *soakChecker) fsckClone(i int, dir string) {
	clone := exec.Command("git", "clone", "-q", "--bare", "--", c.s.base+"/"+c.s.ups.key(i)+".git", dir)
	clone.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if err := clone.Run(); err != nil {
		c.mu.Lock()
		c.cloneFails++ // down, not served yet, or cut mid-way: not a lie
		c.mu.Unlock()
		return
	}
	if out, err := exec.Command("git", "--git-dir", dir, "fsck", "--strict", "--full", "--no-dangling").CombinedOutput(); err != nil {
		c.violate("%s: a clone from the full node fails git fsck: %v: %s", c.s.ups.key(i), err, strings.TrimSpace(string(out)))
	}
	out, err := exec.Command("git", "--git-dir", dir, "for-each-ref", "--format=%(objectname) %(refname)").Output()
	if err != nil {
		c.violate("%s: cannot list the refs of a clone: %v", c.s.ups.key(i), err)
		return
	}
	refs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if oid, name, ok := strings.Cut(line, " "); ok {
			refs[name] = oid
		}
	}
	c.checkRefs(i, refs, "a clone")
	c.mu.Lock()
	c.fscks++
	c.mu.Unlock()
}

// sampleLoop reads every process's resident memory, threads and open
// files from /proc, and the size of its data directory, every 5 s.
func (c *soakChecker) sampleLoop(stop <-chan struct{}) {
	for {
		c.sampleAll()
		select {
		case <-stop:
			return
		case <-time.After(5 * time.Second):
		}
	}
}

func (c *soakChecker) sampleAll() {
	for _, role := range c.s.roles() {
		p := c.s.proc(role)
		if p == nil {
			continue
		}
		smp, err := sampleProc(p.cmd.Process.Pid)
		if err != nil {
			continue // between a kill and a restart
		}
		smp.disk = dirBytes(c.s.dataDirs[role])
		c.mu.Lock()
		pk := c.peak[role]
		pk.rssKiB, pk.threads, pk.fds, pk.disk = max(pk.rssKiB, smp.rssKiB), max(pk.threads, smp.threads), max(pk.fds, smp.fds), max(pk.disk, smp.disk)
		c.peak[role], c.last[role] = pk, smp
		c.mu.Unlock()
	}
}

func sampleProc(pid int) (soakSample, error) {
	var s soakSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			s.rssKiB = n
		case "Threads":
			s.threads = n
		case "State":
			if f[0] == "Z" {
				return s, fmt.Errorf("process %d is a zombie", pid)
			}
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = int64(len(fds))
	return s, nil
}

func dirBytes(root string) int64 {
	var n int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// converged says what keeps the full node from serving exactly the
// upstream's refs of every repository it should, and nothing of those it
// should not (nil: nothing).
func (c *soakChecker) converged() error {
	want, gone := c.s.desired()
	for _, i := range want {
		if err := c.convergedOne(i, true); err != nil {
			return err
		}
	}
	for _, i := range gone {
		if err := c.convergedOne(i, false); err != nil {
			return err
		}
	}
	return nil
}

// convergedOne is converged for repository i, which the full node must
// serve (wanted) or not.
func (c *soakChecker) convergedOne(i int, wanted bool) error {
	got, err := c.s.served(i)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", c.s.ups.key(i), err)
	case !wanted && got != nil:
		return fmt.Errorf("%s: removed, still served", c.s.ups.key(i))
	case !wanted:
		return nil
	case got == nil:
		return fmt.Errorf("%s: not served", c.s.ups.key(i))
	}
	c.checkRefs(i, got, "ls-remote")
	up := c.s.ups.repos[i].current()
	for ref, oid := range up {
		if got[ref] != oid {
			return fmt.Errorf("%s: serves %s=%q, the upstream has %s", c.s.ups.key(i), ref, got[ref], oid)
		}
	}
	for ref := range got {
		if _, ok := up[ref]; !ok {
			return fmt.Errorf("%s: serves %s, which the upstream deleted", c.s.ups.key(i), ref)
		}
	}
	return nil
}

// convergence waits, up to bound, until every repository is served as its
// upstream has it (or, if removed, not served), and returns how long the
// slowest took (the start of the first look that found it converged: an
// upper bound) and what it waited for last (nil: nothing, every
// repository had converged at its first look). Each repository is looked at
// until it first converges; a last pass over all of them confirms it.
func (c *soakChecker) convergence(bound time.Duration) (time.Duration, error, error) {
	start := time.Now()
	want, gone := c.s.desired()
	pending := map[int]bool{}
	for _, i := range want {
		pending[i] = true
	}
	for _, i := range gone {
		pending[i] = false
	}
	var slowest time.Duration
	var lastWait, err error
	lastLog := start
	for time.Since(start) < bound {
		for i, wanted := range pending {
			at := time.Since(start) // it converged before this look
			if e := c.convergedOne(i, wanted); e != nil {
				lastWait = e
				continue
			}
			delete(pending, i)
			slowest = max(slowest, at)
		}
		if len(pending) == 0 {
			if err = c.converged(); err == nil {
				return slowest, lastWait, nil
			}
			slowest = time.Since(start) // one went back: wait for all again
			for _, i := range want {
				pending[i] = true
			}
			for _, i := range gone {
				pending[i] = false
			}
		}
		if time.Since(lastLog) > 10*time.Second {
			c.s.t.Logf("soak: converging for %v, %d repositories left, e.g. %v", time.Since(start).Round(time.Second), len(pending), lastWait)
			lastLog = time.Now()
		}
		time.Sleep(time.Second)
	}
	if err == nil {
		err = fmt.Errorf("%d repositories left, e.g. %v", len(pending), lastWait)
	}
	return time.Since(start), lastWait, err
}

// nodesLoop watches the API's list of nodes: every node of the soak is
// honest, so none may be counted as serving forged tips, nor revoked.
func (c *soakChecker) nodesLoop(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(5 * time.Second):
		}
		nodes, err := c.nodes()
		if err != nil {
			continue // the full node or the coordinator is down
		}
		for _, n := range nodes {
			c.mu.Lock()
			prev := c.accused[n.Name]
			c.accused[n.Name] = n.Mismatches // a restarted full node counts from 0
			c.mu.Unlock()
			if n.Mismatches > prev {
				c.violate("node %s (honest) counted as serving forged tips in %d pulls", n.Name, n.Mismatches-prev)
			}
			if n.State == "revoked" {
				c.violate("node %s (honest) revoked: %s", n.Name, n.Reason)
			}
		}
	}
}

type soakNode struct {
	ID         uint32 `json:"id"`
	Name       string `json:"name"`
	State      string `json:"state"`
	Reason     string `json:"revoked_reason"`
	Mismatches uint64 `json:"mismatches"`
	// What the load bound is checked with.
	Repos           int     `json:"repos"`
	EffectiveWeight float64 `json:"effective_weight"`
	DiskUsed        uint64  `json:"disk_used"`
	DiskTotal       uint64  `json:"disk_total"`
}

func (c *soakChecker) nodes() ([]soakNode, error) {
	resp, err := http.Get(c.s.base + "/api/v1/nodes")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Nodes []soakNode `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	return body.Nodes, nil
}

// placement checks from the API that every repository the fleet must
// serve has one owner and that the owner is alive.
func (c *soakChecker) placement() error {
	nodes, err := c.nodes()
	if err != nil {
		return err
	}
	state := map[uint32]string{}
	for _, n := range nodes {
		state[n.ID] = n.Name + " " + n.State
	}
	repos, err := apiRepos(c.s.base)
	if err != nil {
		return err
	}
	want, _ := c.s.desired()
	for _, i := range want {
		r, ok := repos[c.s.ups.key(i)]
		switch {
		case !ok:
			return fmt.Errorf("%s: not listed by the API", c.s.ups.key(i))
		case r.Owner == 0:
			return fmt.Errorf("%s: no owner", c.s.ups.key(i))
		case !strings.HasSuffix(state[r.Owner], " alive"):
			return fmt.Errorf("%s: owned by node %d (%q), not alive", c.s.ups.key(i), r.Owner, state[r.Owner])
		}
	}
	return nil
}

// networksWhole returns how many of the repositories the fleet must serve
// are in a fork network, and an error naming a network (not split in
// parts) whose members are owned by two nodes. A member handed back by a
// full disk is owned apart until it comes back: wait for it as for the
// load bound.
func (c *soakChecker) networksWhole() (int, error) {
	repos, err := apiRepos(c.s.base)
	if err != nil {
		return 0, err
	}
	want, _ := c.s.desired()
	owner := map[string]apiRepo{}
	members := 0
	for _, i := range want {
		r := repos[c.s.ups.key(i)]
		if r.Network == "" || r.NetworkParts > 1 {
			continue
		}
		members++
		if o, ok := owner[r.Network]; ok && o.Owner != r.Owner {
			return members, fmt.Errorf("network %s: %s is owned by node %d, %s by node %d", r.Network, o.Key, o.Owner, r.Key, r.Owner)
		}
		owner[r.Network] = r
	}
	return members, nil
}

// tmpLeft names what is left in the nodes' temporary directories (clones,
// quarantines) when nothing is being fetched. The full node's pack cache
// (tmp/packcache) is a bounded cache of its own, not a leftover.
// inFlightTrace tells the curl trace of a git command that talks to an
// upstream, which lives in <data>/tmp while the command runs (gitcmd's
// Options.TempDir): a node that checks every few seconds always has one,
// and a start empties tmp of any a kill left.
func inFlightTrace(name string) bool { return strings.HasPrefix(name, "gitfleet-curl-trace-") }

func (c *soakChecker) tmpLeft() error {
	for _, role := range c.s.nodeNames() {
		entries, err := os.ReadDir(filepath.Join(c.s.dataDirs[role], "tmp"))
		if err != nil {
			continue
		}
		var names []string
		for _, e := range entries {
			if e.Name() != "packcache" && !inFlightTrace(e.Name()) {
				names = append(names, e.Name())
			}
		}
		if len(names) > 0 {
			return fmt.Errorf("%s: tmp holds %s", role, strings.Join(names, ", "))
		}
	}
	return nil
}
