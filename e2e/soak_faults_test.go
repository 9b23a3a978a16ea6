package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// soakFault is one fault of the plan: its kind, when it starts (from the
// start of the chaos), how long it lasts and what it hits. The plan is
// drawn from the seed before the chaos starts, so a seed names it.
type soakFault struct {
	at     time.Duration
	kind   string
	target string        // a role or a link
	dur    time.Duration // how long the fault lasts
	delay  time.Duration // latency faults
	repos  []int         // the repositories it touches
	n      int
}

// soakFaultKinds are the faults the soak injects, each as likely.
var soakFaultKinds = []string{
	"kill-partial", "kill-full", "kill-coordinator",
	"partition-coordinator", "partition-tunnel", "latency",
	"upstream-down", "partition-upstream", "upstream-repo-away",
	"catalog-commit", "api-add-remove", "webhook-storm", "disk-fill",
	"bit-rot",
}

// planFaults draws the faults of a chaos phase of length d, one every
// `every` on average. nodes are the full node and then the partial ones;
// coords the coordinators.
func planFaults(rng *rand.Rand, d, every time.Duration, nodes, coords []string, repos int) []soakFault {
	partials := len(nodes) - 1
	var plan []soakFault
	for at := time.Duration(0); ; {
		at += time.Duration(float64(every) * (0.5 + rng.Float64()))
		if at >= d {
			if i := len(plan) / 2; i < len(plan) && !slices.ContainsFunc(plan, func(f soakFault) bool { return f.kind == "bit-rot" }) {
				// Every run rots one mirror: the fault in the middle becomes one.
				plan[i] = soakFault{at: plan[i].at, kind: "bit-rot", target: "full", dur: plan[i].dur,
					repos: []int{soakBlobRepo(rng.IntN(max(repos/soakBlobEvery, 1)))}}
			}
			return plan
		}
		f := soakFault{at: at, kind: soakFaultKinds[rng.IntN(len(soakFaultKinds))], dur: time.Duration(2+rng.IntN(12)) * time.Second}
		switch f.kind {
		case "kill-partial":
			f.target = fmt.Sprintf("partial-%d", 1+rng.IntN(partials))
			f.dur = time.Duration(rng.IntN(4000)) * time.Millisecond
		case "kill-full", "kill-coordinator":
			f.target = strings.TrimPrefix(f.kind, "kill-")
			if len(coords) > 1 && f.target == "coordinator" {
				f.target = "leader" // found when the fault comes
			}
			f.dur = time.Duration(rng.IntN(3000)) * time.Millisecond
		case "partition-coordinator":
			// One node from the coordinators; with several coordinators,
			// sometimes one of them from every node.
			f.target = nodes[rng.IntN(len(nodes))]
			if len(coords) > 1 && rng.IntN(3) == 0 {
				f.target = coords[rng.IntN(len(coords))]
			}
			f.n = rng.IntN(2) // 0: refused, 1: black hole
		case "partition-tunnel":
			f.n = rng.IntN(2)
		case "latency":
			f.target = []string{"upstream", "tunnel", "coordinator"}[rng.IntN(3)]
			switch {
			case f.target == "coordinator":
				f.target = nodes[rng.IntN(len(nodes))]
			case f.target == "upstream" && rng.IntN(2) == 0: // one node's path to the upstreams
				f.target = "upstream-" + nodes[rng.IntN(len(nodes))]
			}
			f.delay = time.Duration(20+rng.IntN(280)) * time.Millisecond
		case "upstream-down":
			f.n = rng.IntN(2)
			f.dur = time.Duration(2+rng.IntN(8)) * time.Second
		case "partition-upstream": // one node from the upstreams, while the others fetch
			f.target = nodes[rng.IntN(len(nodes))]
			f.n = rng.IntN(2)
		case "upstream-repo-away":
			f.repos = []int{rng.IntN(repos)}
		case "catalog-commit":
			f.n = 1 + rng.IntN(max(1, repos/20))
		case "api-add-remove":
			f.n = rng.IntN(2) // 0: add, 1: remove
		case "webhook-storm":
			f.n = 50 + rng.IntN(100)
		case "disk-fill":
			f.target = fmt.Sprintf("partial-%d", partials)
			f.dur = time.Duration(5+rng.IntN(20)) * time.Second
		case "bit-rot": // in the full node's copy of a repository with a blob to rot
			f.target = "full"
			f.repos = []int{soakBlobRepo(rng.IntN(max(repos/soakBlobEvery, 1)))}
		}
		plan = append(plan, f)
	}
}

func (f soakFault) String() string {
	s := fmt.Sprintf("+%v %s", f.at.Round(time.Millisecond), f.kind)
	if f.target != "" {
		s += " " + f.target
	}
	for _, i := range f.repos {
		s += " " + soakName(i)
	}
	return s + fmt.Sprintf(" for %v", f.dur)
}

// soakChaos runs a plan against a fleet.
type soakChaos struct {
	s   *soakFleet
	c   *soakChecker
	rng *rand.Rand // catalog and API choices, drawn in plan order
	// pool is every repository the upstream has: the first ones are listed
	// at the start, the rest are there to be added.
	pool int

	mu     sync.Mutex
	counts map[string]int
	errs   []string
	rotten []int // repositories a bit-rot fault hit
}

func (x *soakChaos) count(kind string) {
	x.mu.Lock()
	x.counts[kind]++
	x.mu.Unlock()
}

// note records a fault the soak could not inject as planned (not a
// violation of the fleet's promises, but shown in the report).
func (x *soakChaos) note(format string, args ...any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.errs) < 20 {
		x.errs = append(x.errs, fmt.Sprintf(format, args...))
	}
}

// run injects the plan's faults at their times, each in its own goroutine,
// and returns once every fault has ended.
func (x *soakChaos) run(plan []soakFault) {
	start := time.Now()
	var wg sync.WaitGroup
	for _, f := range plan {
		time.Sleep(time.Until(start.Add(f.at)))
		x.s.t.Logf("soak fault %s", f)
		x.count(f.kind)
		// Catalog and API choices depend on the state, so they are made in
		// plan order, before the fault's goroutine starts.
		var work func()
		switch f.kind {
		case "catalog-commit":
			work = x.catalogCommit(f)
		case "api-add-remove":
			work = x.apiAddRemove(f)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if work != nil {
				work()
				return
			}
			x.inject(f)
		}()
	}
	wg.Wait()
}

// linksOf are the links a fault on target acts on: the upstreams' shared
// link, one node's path to the upstreams (upstream-NODE), the tunnel, a
// node's paths to the coordinators (NODE) or every path to one
// coordinator (a coordinator's role).
func (x *soakChaos) linksOf(target string) []*link {
	switch target {
	case "upstream":
		return []*link{x.s.ups.link}
	case "tunnel":
		return []*link{x.s.tunLink}
	}
	if n, ok := strings.CutPrefix(target, "upstream-"); ok {
		return []*link{x.s.upLinks[n]}
	}
	if ls, ok := x.s.toCoord[target]; ok {
		return ls
	}
	return x.s.coord[target]
}

func (x *soakChaos) inject(f soakFault) {
	s := x.s
	switch f.kind {
	case "kill-partial", "kill-full":
		s.kill(f.target, f.dur)
	case "kill-coordinator":
		target := f.target
		if s.etcd != "" {
			// The one that leads now, as the election key in etcd says.
			if target = s.leader(); target == "" {
				x.note("%s: no coordinator leads", f)
				return
			}
			s.t.Logf("soak: the leader is %s", target)
			x.count("kill-leader")
		}
		s.kill(target, f.dur)
	case "partition-coordinator", "partition-tunnel", "upstream-down", "partition-upstream":
		target := map[string]string{"partition-coordinator": f.target, "partition-tunnel": "tunnel", "upstream-down": "upstream",
			"partition-upstream": "upstream-" + f.target}[f.kind]
		mode := linkDown
		if f.n == 1 {
			mode = linkBlackhole
		}
		ls := x.linksOf(target)
		for _, l := range ls {
			l.set(mode, 0)
		}
		time.Sleep(f.dur)
		for _, l := range ls {
			l.heal()
		}
	case "latency":
		ls := x.linksOf(f.target)
		for _, l := range ls {
			l.set(linkUp, f.delay)
		}
		time.Sleep(f.dur)
		for _, l := range ls {
			l.heal()
		}
	case "upstream-repo-away":
		r := s.ups.repos[f.repos[0]]
		if err := r.goAway(); err != nil {
			x.note("%s: %v", f, err)
			return
		}
		time.Sleep(f.dur)
		if err := r.comeBack(); err != nil {
			s.t.Errorf("soak: bring back %s: %v", r.name, err)
		}
	case "webhook-storm":
		want, _ := s.desired()
		rng := rand.New(rand.NewPCG(uint64(f.at), uint64(f.n)))
		for k := 0; k < f.n && len(want) > 0; k++ {
			i := want[rng.IntN(len(want))]
			_ = s.hook(i, s.ups.repos[i].current()["refs/heads/main"], fmt.Sprintf("storm-%d-%d", f.at, k))
		}
	case "bit-rot":
		x.rot(f)
	case "disk-fill":
		// One file per fault: two fills may overlap.
		ballast := filepath.Join(s.dataDirs[f.target], "repos", fmt.Sprintf("soak-ballast-%d", f.at))
		if err := os.MkdirAll(filepath.Dir(ballast), 0o755); err != nil {
			x.note("%s: %v", f, err)
			return
		}
		if err := os.WriteFile(ballast, make([]byte, soakQuotaBytes), 0o644); err != nil {
			x.note("%s: %v", f, err)
			return
		}
		time.Sleep(f.dur)
		if err := os.Remove(ballast); err != nil {
			s.t.Errorf("soak: remove the ballast: %v", err)
		}
	}
}

// rot overwrites 64 bytes inside the largest blob of the full node's pack
// of f's repository, where git's walk never looks and upload-pack copies
// them out unchecked. Then a client clones it: the clone fails (the full
// node finds the rot and repairs it) or is whole and passes git fsck; a
// clone that is not is a violation. The repository is checked again once
// the faults stopped (rotRepaired).
func (x *soakChaos) rot(f soakFault) {
	i := f.repos[0]
	if i >= len(x.s.ups.repos) {
		x.note("%s: no such repository", f)
		return
	}
	dir := filepath.Join(x.s.dataDirs[f.target], "repos", filepath.FromSlash(x.s.ups.key(i))+".git")
	if _, _, err := gittest.RotPack(dir); err != nil {
		x.note("%s: %v", f, err) // not mirrored yet, or removed
		return
	}
	x.mu.Lock()
	x.rotten = append(x.rotten, i)
	x.mu.Unlock()
	clone := filepath.Join(x.s.t.TempDir(), "rot")
	x.c.fsckClone(i, clone)
	_ = os.RemoveAll(clone)
}

// rotRepaired clones every repository rot hit that is still listed: each
// must clone whole and pass git fsck, once the full node repaired it.
func (x *soakChaos) rotRepaired() error {
	x.mu.Lock()
	rotten := slices.Clone(x.rotten)
	x.mu.Unlock()
	want, _ := x.s.desired()
	for _, i := range rotten {
		if !slices.Contains(want, i) {
			continue
		}
		dir := filepath.Join(x.s.t.TempDir(), "rot")
		clone := exec.Command("git", "clone", "-q", "--bare", "--", x.s.base+"/"+x.s.ups.key(i)+".git", dir)
		clone.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
		if out, err := clone.CombinedOutput(); err != nil {
			return fmt.Errorf("%s, rotten during the chaos: clone: %v: %s", x.s.ups.key(i), err, strings.TrimSpace(string(out)))
		}
		if out, err := exec.Command("git", "--git-dir", dir, "fsck", "--strict", "--full", "--no-dangling").CombinedOutput(); err != nil {
			x.c.violate("%s: a clone after the rot fails git fsck: %v: %s", x.s.ups.key(i), err, strings.TrimSpace(string(out)))
		}
		_ = os.RemoveAll(dir)
	}
	return nil
}

// catalogCommit adds, removes and moves (from a .list line to a YAML entry
// or back) f.n repositories each, in one commit.
func (x *soakChaos) catalogCommit(f soakFault) func() {
	s := x.s
	s.catalogMu.Lock()
	defer s.catalogMu.Unlock()
	var listed, unlisted []int
	for i := 0; i < x.pool; i++ {
		switch {
		case s.listed[i]:
			listed = append(listed, i)
		case !s.apiAdded[i] && !s.inFlight[i] && !s.unknown[i]:
			unlisted = append(unlisted, i)
		}
	}
	var msg []string
	for _, i := range pick(x.rng, unlisted, f.n) {
		s.listed[i] = true
		delete(s.removed, i)
		msg = append(msg, fmt.Sprintf("add %d", i))
	}
	for _, i := range pick(x.rng, listed, f.n) {
		if x.rng.IntN(2) == 0 {
			delete(s.listed, i)
			delete(s.yamlForm, i)
			s.removed[i] = true
			msg = append(msg, fmt.Sprintf("remove %d", i))
		} else {
			s.yamlForm[i] = !s.yamlForm[i]
			msg = append(msg, fmt.Sprintf("move %d", i))
		}
	}
	if err := s.writeCatalog(strings.Join(msg, ", ")); err != nil {
		s.t.Errorf("soak: catalog commit: %v", err)
	}
	return func() {}
}

// apiAddRemove adds a repository through the API (f.n == 0) or removes
// one it added. A call whose answer is lost leaves the repository out of
// both the wanted and the removed sets: the test cannot know which it is.
func (x *soakChaos) apiAddRemove(f soakFault) func() {
	s := x.s
	s.catalogMu.Lock()
	defer s.catalogMu.Unlock()
	var candidates []int
	for i := 0; i < x.pool; i++ {
		if s.inFlight[i] || s.unknown[i] {
			continue
		}
		if f.n == 0 && !s.listed[i] && !s.apiAdded[i] || f.n == 1 && s.apiAdded[i] {
			candidates = append(candidates, i)
		}
	}
	if len(candidates) == 0 {
		return func() {}
	}
	i := pick(x.rng, candidates, 1)[0]
	wasAdded, wasRemoved := s.apiAdded[i], s.apiRemoved[i]
	delete(s.apiAdded, i)
	delete(s.apiRemoved, i)
	s.inFlight[i] = true
	return func() {
		method, url, body, ok := "POST", s.base+"/api/v1/repos", fmt.Sprintf(`{"url":%q}`, s.ups.url(i)), []int{201, 200}
		if f.n == 1 {
			method, url, body, ok = "DELETE", s.base+"/api/v1/repos/"+s.ups.key(i), "", []int{200, 204}
		}
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+apiToken)
			req.Header.Set("Content-Type", "application/json")
		}
		var code int
		if err == nil {
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
		}
		s.catalogMu.Lock()
		defer s.catalogMu.Unlock()
		delete(s.inFlight, i)
		switch {
		case err != nil:
			x.note("%s %s: %v (its outcome is unknown: left unchecked)", method, s.ups.key(i), err)
			s.unknown[i] = true
		case !slices.Contains(ok, code): // refused: as it was
			x.note("%s %s: status %d", method, s.ups.key(i), code)
			if wasAdded {
				s.apiAdded[i] = true
			}
			if wasRemoved {
				s.apiRemoved[i] = true
			}
		case f.n == 0:
			s.apiAdded[i] = true
		default:
			s.apiRemoved[i] = true
		}
	}
}

// pick draws up to n distinct elements of from.
func pick(rng *rand.Rand, from []int, n int) []int {
	from = slices.Clone(from)
	rng.Shuffle(len(from), func(a, b int) { from[a], from[b] = from[b], from[a] })
	return from[:min(n, len(from))]
}
