package sim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/gitfleet/gitfleet/internal/placement"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// The full tier (--tier): the real placement.Tier over N full nodes of
// equal disks and K repositories whose sizes are drawn from a lognormal
// distribution (seeded) and scaled to a total. It reports the bytes each
// full node holds against the mean, the repositories a join and a loss
// move against the ideal R×K/N, and the time a loss takes to restore R
// replicas when every node moves at most a link's rate. Copies are
// instant: the tier's rules, not the nodes' pace, are what it measures.

// tierOptions say what the tier simulation runs.
type tierOptions struct {
	keys, nodes, replicas int
	seed                  uint64
	totalBytes            float64
	sigma                 float64 // of the sizes' lognormal
	link                  float64 // bytes per second per node
	byCount               bool    // weight units by 1, not by bytes
}

// tierStep is one step's figures.
type tierStep struct {
	Step string `json:"step"`
	// MaxOverMean is the largest member's bytes over the mean.
	MaxOverMean float64 `json:"max_over_mean"`
	// Moved is the replicas created; Ideal is R×K/N.
	Moved int     `json:"moved"`
	Ideal float64 `json:"ideal"`
	// MovedBytes is their bytes; Seconds the time to copy them when each
	// node sends and receives at most the link's rate at once.
	MovedBytes float64 `json:"moved_bytes"`
	Seconds    float64 `json:"seconds"`
}

// tierSizes draws k sizes from a lognormal with the given sigma, scaled so
// that they sum to total, each at least one byte.
func tierSizes(k int, seed uint64, sigma, total float64) []int {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	raw := make([]float64, k)
	var sum float64
	for i := range raw {
		raw[i] = math.Exp(sigma * rng.NormFloat64())
		sum += raw[i]
	}
	out := make([]int, k)
	for i, r := range raw {
		out[i] = max(1, int(r/sum*total))
	}
	return out
}

// runTier runs the tier simulation: the initial placement, the join of
// node N+1, then the loss (past its grace) of node 1.
func runTier(o tierOptions, report func(tierStep) error) error {
	sizes := tierSizes(o.keys, o.seed, o.sigma, o.totalBytes)
	names := make([]string, o.keys)
	tier := placement.NewTier(placement.TierConfig{Replicas: o.replicas})
	for i, s := range sizes {
		names[i] = "host.example/repo/" + strconv.Itoa(i)
		if o.byCount {
			s = 1
		}
		tier.SetUnit(names[i], s)
	}
	size := make(map[string]int, len(names))
	for i, n := range names {
		size[n] = sizes[i]
	}
	members := make([]ring.Member, o.nodes)
	for i := range members {
		members[i] = ring.Member{ID: uint32(i + 1), Weight: 1}
	}
	step := func(name string, ms []ring.Member) error {
		tier.SetMembers(ms)
		in, out := map[uint32]float64{}, map[uint32]float64{}
		st := tierStep{Step: name, Ideal: float64(o.replicas) * float64(o.keys) / float64(len(ms))}
		for _, d := range tier.Decisions() {
			if d.Kind != placement.Assign {
				continue
			}
			b := float64(size[d.Unit])
			st.Moved++
			st.MovedBytes += b
			in[d.Node] += b
			if d.From != 0 {
				out[d.From] += b
			}
			tier.Confirm(d.Node, d.Unit)
		}
		tier.Decisions() // the drops the confirmations allow
		var busiest float64
		for _, m := range []map[uint32]float64{in, out} {
			for _, b := range m {
				busiest = max(busiest, b)
			}
		}
		st.Seconds = busiest / o.link
		bytes := map[uint32]float64{}
		for _, n := range names {
			want, _, _ := tier.ReplicasOf(n)
			for _, id := range want {
				bytes[id] += float64(size[n])
			}
		}
		var sum, most float64
		for _, b := range bytes {
			sum += b
			most = max(most, b)
		}
		st.MaxOverMean = most / (sum / float64(len(ms)))
		if name == "start" {
			st.Moved, st.MovedBytes, st.Seconds, st.Ideal = 0, 0, 0, 0
		}
		return report(st)
	}
	if err := step("start", members); err != nil {
		return err
	}
	joined := append(slices.Clone(members), ring.Member{ID: uint32(o.nodes + 1), Weight: 1})
	if err := step(fmt.Sprintf("join node=%d", o.nodes+1), joined); err != nil {
		return err
	}
	return step("loss node=1", joined[1:])
}

// tierReport prints a step of the tier simulation as text.
func tierReport(w io.Writer) func(tierStep) error {
	return func(s tierStep) error {
		_, err := fmt.Fprintf(w, "%-12s bytes max/mean %.3f", s.Step, s.MaxOverMean)
		if err == nil && s.Ideal > 0 {
			_, err = fmt.Fprintf(w, "  moved %d (%.3f of ideal %.0f), %.1f TB, restored in %.1f h at the link rate",
				s.Moved, float64(s.Moved)/s.Ideal, s.Ideal, s.MovedBytes/1e12, s.Seconds/3600)
		}
		if err == nil {
			_, err = fmt.Fprintln(w)
		}
		return err
	}
}
