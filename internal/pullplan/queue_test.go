package pullplan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The queue gives its entries in the order of a sort by due time then
// arrival, through random pushes, removals and changes of due time, and
// every entry knows its index.
func TestTheQueueKeepsTheOrderOfASort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	type item struct {
		e        *entry
		due, seq int64
	}
	var in []*item // the model: what is queued
	var seq int64
	for range 5000 {
		switch op := rng.IntN(10); {
		case op < 5 || len(in) == 0:
			seq++
			it := &item{e: &entry{}, due: rng.Int64N(20), seq: seq}
			q.push(it.e, it.due, uint64(it.seq))
			in = append(in, it)
		case op < 7:
			i := rng.IntN(len(in))
			q.remove(int(in[i].e.at))
			if in[i].e.at != -1 {
				t.Fatal("a removed entry keeps an index")
			}
			in = slices.Delete(in, i, i+1)
		case op < 9:
			it := in[rng.IntN(len(in))]
			it.due = rng.Int64N(20)
			q.fix(int(it.e.at), it.due)
		default:
			first := slices.MinFunc(in, func(a, b *item) int {
				if a.due != b.due {
					return int(a.due - b.due)
				}
				return int(a.seq - b.seq)
			})
			if top := q.top(); top != first.e {
				t.Fatalf("top due %d seq %d, want due %d seq %d", q[0].due, q[0].seq, first.due, first.seq)
			}
		}
		for i, s := range q {
			if int(s.e.at) != i {
				t.Fatalf("entry at %d knows index %d", i, s.e.at)
			}
		}
	}
}
