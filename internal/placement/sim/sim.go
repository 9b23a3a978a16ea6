// Package sim implements `gitfleet sim placement`: it runs the
// coordinator's real membership table (package membership) and placement
// engine (package placement) in one process, with a simulated clock, over a
// simulated fleet of nodes and synthetic repository keys, through a
// scenario of fleet events, and reports for each step the keys moved
// against the minimum that had to move, the balance of load, the clones in
// flight and the time the fleet took to converge.
//
// With --tier it runs the full tier's placement instead (placement.Tier,
// tier.go): repositories of heavy-tailed sizes on full nodes, each held by
// R of them, through a join and a loss, reporting bytes per node against
// the mean and the replicas moved against the ideal R×K/N.
//
// It owns only the simulated nodes (a clone takes simulated time, then the
// node confirms it; a node that crashes keeps its disk and reports what it
// holds when it returns) and the report. Every rule of placement and
// membership is the real code's: the simulator must not add one. It reads
// only the scenario file and writes only the report.
//
// A scenario is a text file, one step per line; '#' starts a comment:
//
//	join node=ID [weight=W]           a node joins (weight 1 by default)
//	leave node=ID                     a node is removed for good (forgotten)
//	crash node=ID                     a node's session drops; it keeps its disk
//	return node=ID                    a crashed node reconnects and reports what it holds
//	flap node=ID [times=N] [every=D]  N crashes, each followed by a return, one every D (4, 2m)
//	disk node=ID used=P%              a node reports its disk usage; above the high
//	                                  mark (85%) it hands back keys to get to 80%
//	wait                              nothing happens; give it for=
//
// Every step also takes for=DURATION (90s, 15m, 2h, 1d): the least
// simulated time it lasts. A step then runs until every move it caused is
// done (or 30 simulated days have passed).
package sim

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

const usage = `usage: gitfleet sim placement [--keys K] [--nodes N] [--scenario FILE] [--json]
                                [--seed S] [--clone-time D] [--max-in-flight M]
       gitfleet sim placement --tier [--keys K] [--nodes N] [--replicas R]
                                [--terabytes T] [--sigma S] [--by-count] [--seed S] [--json]

Runs the coordinator's real membership and placement code in one process with
a simulated clock, over N nodes of weight 1 (IDs 1..N) and K synthetic keys,
through a scenario, and prints for each step: the keys moved, the minimum that
had to move (what the nodes that gained keys gained), max/mean load (per unit
of weight), clones in flight at the end of the step and at its peak, and the
simulated time until the last move of the step was done.

flags:
  --keys K           keys (default 100000)
  --nodes N          nodes at the start (default 50; at least 5 for the default scenario)
  --scenario FILE    the scenario (default: a step of each kind, below)
  --json             one JSON object per line and step
  --seed S           seeds the clone times (default 1)
  --clone-time D     mean simulated time of a clone (default 30s)
  --max-in-flight M  clones in flight per node (default 50)

  --tier             simulate the full tier instead: K repositories of sizes drawn
                     from a lognormal (seeded by --seed), N full nodes of equal disks,
                     each repository on --replicas of them; reports bytes per node
                     against the mean, the repositories a join of node N+1 and the
                     loss of node 1 move against the ideal R*K/N, and the time to
                     restore R after the loss at 1 Gbit/s per node
  --replicas R       replicas per repository (default 2)
  --terabytes T      total size of the repositories (default 50)
  --sigma S          sigma of the sizes' lognormal (default 2: heavy-tailed)
  --by-count         weight repositories by count, not by bytes

scenario: one step per line, '#' starts a comment; every step takes for=D, the
least simulated time it lasts, then runs until the moves it caused are done.
  join node=ID [weight=W]           a node joins (weight 1 by default)
  leave node=ID                     a node is removed for good
  crash node=ID                     a node's session drops; it keeps its disk
  return node=ID                    a crashed node reconnects and reports what it holds
  flap node=ID [times=N] [every=D]  N crashes and returns, one every D (4, 2m)
  disk node=ID used=P%              a node reports its disk usage; above 85% it
                                    hands back keys to get to 80%
  wait                              nothing happens (give it for=)
durations: 90s, 15m, 2h, 1d

the default scenario, for --nodes 50:
`

// maxStepTime bounds the simulated time of a step: moves that wait for
// something that never comes (every disk full) are reported as pending.
const maxStepTime = 30 * 24 * time.Hour

// simStart is when the simulated clock starts.
var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// options say what to simulate.
type options struct {
	keys, nodes int
	seed        uint64
	cloneTime   time.Duration
	maxInFlight int
}

// Main runs `gitfleet sim placement` with args (what follows "placement")
// and returns the exit code: 0, 1 if the simulation failed, 2 for bad
// arguments.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gitfleet sim placement", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o options
	fs.IntVar(&o.keys, "keys", 100_000, "")
	fs.IntVar(&o.nodes, "nodes", 50, "")
	scenario := fs.String("scenario", "", "")
	asJSON := fs.Bool("json", false, "")
	fs.Uint64Var(&o.seed, "seed", 1, "")
	fs.DurationVar(&o.cloneTime, "clone-time", 30*time.Second, "")
	fs.IntVar(&o.maxInFlight, "max-in-flight", placement.DefaultMaxInFlight, "")
	tier := fs.Bool("tier", false, "")
	to := tierOptions{link: 1e9 / 8}
	fs.IntVar(&to.replicas, "replicas", placement.DefaultReplicas, "")
	terabytes := fs.Float64("terabytes", 50, "")
	fs.Float64Var(&to.sigma, "sigma", 2, "")
	fs.BoolVar(&to.byCount, "by-count", false, "")
	bad := func(err error) int {
		fmt.Fprintf(stderr, "gitfleet sim placement: %v\n%s%s", err, usage, defaultScenario(50))
		return 2
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage+defaultScenario(50))
		return 0
	} else if err != nil {
		return bad(err)
	}
	switch {
	case fs.NArg() > 0:
		return bad(fmt.Errorf("unexpected arguments %q", fs.Args()))
	case o.keys < 1 || o.keys > 10_000_000:
		return bad(fmt.Errorf("--keys %d: want 1 to 10000000", o.keys))
	case o.nodes < 1 || o.nodes > 10_000:
		return bad(fmt.Errorf("--nodes %d: want 1 to 10000", o.nodes))
	case o.cloneTime < 2*time.Second || o.cloneTime > 24*time.Hour:
		return bad(fmt.Errorf("--clone-time %v: want 2s to 24h", o.cloneTime))
	case o.maxInFlight < 1:
		return bad(fmt.Errorf("--max-in-flight %d: want at least 1", o.maxInFlight))
	}

	if *tier {
		switch {
		case o.nodes < 2:
			return bad(fmt.Errorf("--tier needs --nodes 2 or more"))
		case to.replicas < 1 || to.replicas > o.nodes:
			return bad(fmt.Errorf("--replicas %d: want 1 to --nodes", to.replicas))
		case !(*terabytes > 0) || !(to.sigma >= 0 && to.sigma <= 5):
			return bad(fmt.Errorf("--terabytes must be > 0 and --sigma within 0 to 5"))
		}
		to.keys, to.nodes, to.seed, to.totalBytes = o.keys, o.nodes, o.seed, *terabytes*1e12
		report := tierReport(stdout)
		if *asJSON {
			enc := json.NewEncoder(stdout)
			report = func(s tierStep) error { return enc.Encode(s) }
		}
		if err := runTier(to, report); err != nil {
			fmt.Fprintf(stderr, "gitfleet sim placement: %v\n", err)
			return 1
		}
		return 0
	}

	var steps []step
	var err error
	if *scenario != "" {
		steps, err = readScenario(*scenario)
	} else if o.nodes < 5 {
		err = fmt.Errorf("the default scenario needs --nodes 5 or more, or give --scenario")
	} else {
		steps, err = parseScenario(strings.NewReader(defaultScenario(o.nodes)))
	}
	if err != nil {
		return bad(err)
	}

	report := textReport(stdout)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		report = func(r result) error { return enc.Encode(r) }
	}
	if err := run(ctx, o, steps, report); err != nil {
		fmt.Fprintf(stderr, "gitfleet sim placement: %v\n", err)
		return 1
	}
	return 0
}

func readScenario(path string) ([]step, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the scenario: %w", err)
	}
	defer f.Close()
	steps, err := parseScenario(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return steps, nil
}

// result is the report of one step.
type result struct {
	Step string `json:"step"`
	// At is the simulated time since the start when the step began.
	At       string `json:"at"`
	Moved    int    `json:"moved"`
	MinMoved int    `json:"min_moved"`
	// MovedOverMin is left out when nothing had to move.
	MovedOverMin *float64 `json:"moved_over_min,omitempty"`
	// MaxOverMean is the largest load per unit of weight over the mean.
	MaxOverMean  float64 `json:"max_over_mean"`
	InFlight     int     `json:"in_flight"`
	PeakInFlight int     `json:"peak_in_flight"`
	Pending      int     `json:"pending"` // moves not done at the end of the step
	Converged    bool    `json:"converged"`
	// ConvergeSeconds is the simulated time from the step's start to its
	// last completed move.
	ConvergeSeconds float64 `json:"converge_seconds"`
	Members         int     `json:"members"`
}

// textReport prints a table, the step last so that columns stay aligned
// while steps are reported one by one.
func textReport(w io.Writer) func(result) error {
	header := false
	return func(r result) error {
		if !header {
			header = true
			if _, err := fmt.Fprintf(w, "%10s %9s %9s %9s %8s %9s %6s %14s  %s\n", "at", "moved", "min_moved",
				"moved/min", "max/mean", "in_flight", "peak", "converged in", "step"); err != nil {
				return err
			}
		}
		ratio := "-"
		if r.MovedOverMin != nil {
			ratio = fmt.Sprintf("%.3f", *r.MovedOverMin)
		}
		conv := (time.Duration(r.ConvergeSeconds) * time.Second).String()
		if !r.Converged {
			conv = fmt.Sprintf("no: %d left", r.Pending)
		}
		_, err := fmt.Fprintf(w, "%10s %9d %9d %9s %8.3f %9d %6d %14s  %s\n", r.At, r.Moved, r.MinMoved, ratio,
			r.MaxOverMean, r.InFlight, r.PeakInFlight, conv, r.Step)
		return err
	}
}

// node is a simulated node.
type node struct {
	weight float64
	up     bool // its session is open
	left   bool // removed from the fleet
	// cloning holds the clones it was told to make, by key, with the
	// number of the assignment (a later one replaces an earlier one).
	cloning map[repokey.Key]uint64
	held    []repokey.Key // what it owned when it went down
}

// job is a clone under way on a node that is up.
type job struct {
	at   time.Time
	node uint32
	key  repokey.Key
	seq  uint64
}

type jobs []job

func (h jobs) Len() int { return len(h) }
func (h jobs) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h jobs) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *jobs) Push(x any)   { *h = append(*h, x.(job)) }
func (h *jobs) Pop() any {
	old := *h
	j := old[len(old)-1]
	*h = old[:len(old)-1]
	return j
}

type simulator struct {
	o       options
	clk     *clock.Fake
	table   *membership.Table
	eng     *placement.Engine
	keys    []repokey.Key
	rng     *rand.Rand
	members []ring.Member // as last given to the engine
	nodes   map[uint32]*node
	jobs    jobs
	seq     uint64

	// The current step.
	start    time.Time
	owners   []uint32 // at its start
	peak     int
	lastMove time.Time
}

// run simulates the initial placement, then steps, and reports each.
func run(ctx context.Context, o options, steps []step, report func(result) error) error {
	cfg := membership.DefaultConfig()
	// A crash drops the session, which makes a node suspect at once, so the
	// simulation needs no heartbeats.
	cfg.HeartbeatTimeout = 365 * 24 * time.Hour
	cfg.WarmupNodes = o.nodes
	s := &simulator{
		o:      o,
		clk:    clock.NewFake(simStart),
		table:  membership.New(cfg, simStart),
		eng:    placement.New(placement.Config{MaxInFlight: o.maxInFlight}),
		keys:   make([]repokey.Key, o.keys),
		rng:    rand.New(rand.NewPCG(o.seed, 0x9e3779b97f4a7c15)),
		nodes:  map[uint32]*node{},
		owners: make([]uint32, o.keys),
	}
	for i := range s.keys {
		// Synthetic keys are parsed like any others: the engine takes
		// only a repokey.Key.
		k, err := repokey.Parse(fmt.Sprintf("sim.example/org%d/repo%d", i%1000, i))
		if err != nil {
			panic(err) // the format above is a valid key
		}
		s.keys[i] = k
	}
	s.eng.AddKeys(s.keys...)
	for id := uint32(1); id <= uint32(o.nodes); id++ {
		s.nodes[id] = &node{weight: 1, up: true, cloning: map[repokey.Key]uint64{}}
		s.table.Connect(membership.NodeInfo{ID: id, Name: fmt.Sprint("node-", id), Weight: 1, Member: true}, s.clk.Now())
	}
	if !s.table.Placing(s.clk.Now()) {
		return errors.New("membership is still warming up with every node connected")
	}

	s.begin()
	s.sync()
	if err := s.settle(ctx, 0); err != nil {
		return err
	}
	if err := report(s.end(fmt.Sprintf("initial: %d keys on %d nodes", o.keys, o.nodes))); err != nil {
		return err
	}
	for _, st := range steps {
		s.begin()
		if err := s.apply(ctx, st); err != nil {
			return fmt.Errorf("scenario line %d (%s): %w", st.line, st.name, err)
		}
		if err := s.settle(ctx, st.hold); err != nil {
			return err
		}
		if err := report(s.end(st.name)); err != nil {
			return err
		}
	}
	return nil
}

func (s *simulator) begin() {
	s.start = s.clk.Now()
	s.lastMove = s.start
	s.peak = s.inFlight()
}

// end measures the step that began at s.start.
func (s *simulator) end(name string) result {
	owners := s.ownerList()
	moved, gain := 0, map[uint32]int{}
	for i, o := range owners {
		if o != s.owners[i] {
			moved++
			gain[s.owners[i]]--
			gain[o]++
		}
	}
	minMoved := 0
	for _, g := range gain {
		minMoved += max(g, 0)
	}
	s.owners = owners

	load := s.eng.Load()
	var total, weight, most float64
	for _, m := range s.members {
		total += float64(load[m.ID])
		weight += m.Weight
		most = max(most, float64(load[m.ID])/m.Weight)
	}
	r := result{
		Step:            name,
		At:              s.start.Sub(simStart).String(),
		Moved:           moved,
		MinMoved:        minMoved,
		InFlight:        s.inFlight(),
		PeakInFlight:    s.peak,
		Pending:         s.eng.PendingMoves(),
		ConvergeSeconds: s.lastMove.Sub(s.start).Seconds(),
		Members:         len(s.members),
	}
	r.Converged = r.Pending == 0
	if total > 0 {
		r.MaxOverMean = most / (total / weight)
	}
	if minMoved > 0 {
		ratio := float64(moved) / float64(minMoved)
		r.MovedOverMin = &ratio
	}
	return r
}

func (s *simulator) ownerList() []uint32 {
	out := make([]uint32, len(s.keys))
	for i, k := range s.keys {
		out[i], _, _ = s.eng.Owner(k)
	}
	return out
}

func (s *simulator) ownedBy(id uint32) []repokey.Key {
	var keys []repokey.Key
	for _, k := range s.keys {
		if o, _, _ := s.eng.Owner(k); o == id {
			keys = append(keys, k)
		}
	}
	return keys
}

func (s *simulator) inFlight() int {
	n := 0
	for _, c := range s.eng.InFlight() {
		n += c
	}
	return n
}

// sync gives the engine the members of the table, if they changed.
func (s *simulator) sync() {
	ms := s.table.Members()
	if !slices.Equal(ms, s.members) {
		s.members = ms
		s.eng.SetMembers(ms)
	}
}

// apply makes the event of st happen.
func (s *simulator) apply(ctx context.Context, st step) error {
	id := st.node
	n := s.nodes[id]
	now := s.clk.Now()
	if st.verb != verbJoin && st.verb != verbWait && (n == nil || n.left) {
		return errors.New(membership.NotInFleet(id))
	}
	switch st.verb {
	case verbJoin:
		if n != nil && !n.left {
			return fmt.Errorf("node %d is already in the fleet", id)
		}
		s.nodes[id] = &node{weight: st.weight, up: true, cloning: map[repokey.Key]uint64{}}
		s.table.Connect(membership.NodeInfo{ID: id, Name: fmt.Sprint("node-", id), Weight: st.weight, Member: true}, now)
		s.sync()
	case verbLeave:
		n.left, n.up, n.held = true, false, nil
		s.table.Forget(id, now)
		s.sync()
	case verbCrash:
		if !n.up {
			return fmt.Errorf("node %d is down already", id)
		}
		s.down(id, n)
	case verbReturn:
		if n.up {
			return fmt.Errorf("node %d is up", id)
		}
		s.up(id, n)
	case verbFlap:
		if !n.up {
			return fmt.Errorf("node %d is down", id)
		}
		for i := range st.times {
			s.down(id, n)
			if err := s.runUntil(ctx, s.clk.Now().Add(st.every/2), false); err != nil {
				return err
			}
			s.up(id, n)
			if i < st.times-1 {
				if err := s.runUntil(ctx, s.clk.Now().Add(st.every-st.every/2), false); err != nil {
					return err
				}
			}
		}
	case verbDisk:
		const total = 1_000_000
		s.eng.SetDisk(id, uint64(math.Round(st.used*total)), total)
		if high := placement.DefaultDiskHighWater; st.used > high {
			// It keeps what fits 5 points under the mark, assuming its
			// keys are of a size.
			owned := s.ownedBy(id)
			keep := int(float64(len(owned)) * (high - 0.05) / st.used)
			s.eng.HandBack(id, owned[keep:]...)
		}
	}
	return nil
}

// down drops the session of node id; it remembers what it holds.
func (s *simulator) down(id uint32, n *node) {
	n.up = false
	n.held = s.ownedBy(id)
	s.table.Disconnect(id, s.clk.Now())
	s.sync()
}

// up reconnects node id: it reports what it holds and resumes the clones
// it was told to make that are still for it.
func (s *simulator) up(id uint32, n *node) {
	n.up = true
	s.table.Connect(membership.NodeInfo{ID: id, Name: fmt.Sprint("node-", id), Weight: n.weight, Member: true}, s.clk.Now())
	s.sync()
	s.eng.Hold(id, n.held...)
	n.held = nil
	for _, k := range slices.Sorted(maps.Keys(n.cloning)) {
		if _, target, _ := s.eng.Owner(k); target != id {
			delete(n.cloning, k)
			continue
		}
		s.seq++
		n.cloning[k] = s.seq
		s.startJob(id, k, s.seq)
	}
}

// settle lasts until at least hold after the step's start, then until the
// step's moves are done.
func (s *simulator) settle(ctx context.Context, hold time.Duration) error {
	return s.runUntil(ctx, s.start.Add(hold), true)
}

// runUntil simulates until the clock reaches until, and, with quiet, until
// no clone is under way and no move pending, or the step has lasted
// maxStepTime.
func (s *simulator) runUntil(ctx context.Context, until time.Time, quiet bool) error {
	limit := s.start.Add(maxStepTime)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("simulation stopped: %w", err)
		}
		s.pump()
		now := s.clk.Now()
		done := len(s.jobs) == 0 && s.eng.PendingMoves() == 0
		if !now.Before(until) && (!quiet || done || !now.Before(limit)) {
			return nil
		}
		next := limit
		if now.Before(until) {
			next = until
		}
		if len(s.jobs) > 0 && s.jobs[0].at.Before(next) {
			next = s.jobs[0].at
		}
		if d, ok := s.table.NextDeadline(); ok && d.Before(next) {
			next = d
		}
		if !next.After(now) {
			next = now.Add(time.Second)
		}
		s.clk.Set(next)
		s.table.Tick(next)
		s.sync()
		for len(s.jobs) > 0 && !s.jobs[0].at.After(next) {
			s.finish(heap.Pop(&s.jobs).(job))
		}
	}
}

// pump hands the engine's decisions to the nodes.
func (s *simulator) pump() {
	for _, d := range s.eng.Decisions() {
		n := s.nodes[d.Node]
		if n == nil {
			continue
		}
		switch d.Kind {
		case placement.Assign:
			s.seq++
			n.cloning[d.Key] = s.seq
			if n.up {
				s.startJob(d.Node, d.Key, s.seq)
			}
		case placement.Drop:
			delete(n.cloning, d.Key)
		}
	}
	s.peak = max(s.peak, s.inFlight())
}

// startJob starts a clone that takes from half to one and a half times the
// mean clone time, in whole seconds.
func (s *simulator) startJob(id uint32, key repokey.Key, seq uint64) {
	d := s.o.cloneTime/2 + time.Duration(s.rng.Int64N(int64(s.o.cloneTime)))
	d = max(d.Round(time.Second), time.Second)
	heap.Push(&s.jobs, job{at: s.clk.Now().Add(d), node: id, key: key, seq: seq})
}

// finish completes a clone, unless its node went down or was told to drop
// the key since.
func (s *simulator) finish(j job) {
	n := s.nodes[j.node]
	if n == nil || !n.up || n.cloning[j.key] != j.seq {
		return
	}
	delete(n.cloning, j.key)
	s.eng.Confirm(j.node, j.key)
	s.lastMove = j.at
}
