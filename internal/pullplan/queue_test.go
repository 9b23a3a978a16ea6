package pullplan

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The queue gives its entries in the order of a sort by due time then
// arrival, through random pushes, removals and changes of due time, and
// every entry knows its index.
func TestTheQueueKeepsTheOrderOfASort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	var in []*entry // the model: what is queued
	var seq uint64
	for range 5000 {
		switch op := rng.IntN(10); {
		case op < 5 || len(in) == 0:
			seq++
			e := &entry{due: t0.Add(time.Duration(rng.IntN(20)) * time.Second), seq: seq}
			q.push(e)
			in = append(in, e)
		case op < 7:
			i := rng.IntN(len(in))
			q.remove(in[i].at)
			if in[i].at != -1 {
				t.Fatal("a removed entry keeps an index")
			}
			in = slices.Delete(in, i, i+1)
		case op < 9:
			e := in[rng.IntN(len(in))]
			e.due = t0.Add(time.Duration(rng.IntN(20)) * time.Second)
			q.fix(e.at)
		default:
			first := slices.MinFunc(in, func(a, b *entry) int {
				if c := a.due.Compare(b.due); c != 0 {
					return c
				}
				return int(a.seq) - int(b.seq)
			})
			if top := q.top(); top != first {
				t.Fatalf("top due %v seq %d, want due %v seq %d", top.due, top.seq, first.due, first.seq)
			}
		}
		for i, s := range q {
			if s.e.at != i || s.due != dueKey(s.e.due) {
				t.Fatalf("entry at %d knows index %d, due %d for %d", i, s.e.at, s.due, dueKey(s.e.due))
			}
		}
	}
}
