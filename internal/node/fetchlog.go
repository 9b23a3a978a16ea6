package node

import (
	"errors"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// refChanges counts the refs that after created, moved or deleted from
// before, and names the first fetchlog.MaxRefNames of them in order, with
// their old and new IDs.
func refChanges(before, after gitcmd.Refs) (int, []string, []fetchlog.Move) {
	var names []string
	for ref, oid := range after.Refs {
		if before.Refs[ref] != oid {
			names = append(names, ref)
		}
	}
	for ref := range before.Refs {
		if _, ok := after.Refs[ref]; !ok {
			names = append(names, ref)
		}
	}
	slices.Sort(names)
	total := len(names)
	names = names[:min(total, fetchlog.MaxRefNames)]
	var moves []fetchlog.Move
	for _, ref := range names {
		moves = append(moves, fetchlog.Move{Ref: ref, Old: before.Refs[ref], New: after.Refs[ref]})
	}
	return total, names, moves
}

// WorkEntry is the fetch log's entry of a sync of key that started at
// start and gave res or err: kind names the work when it succeeded or
// failed ("check" becomes "fetch" or "clone" from what res says).
func (n *Node) WorkEntry(key, kind string, start time.Time, res mirror.Result, err error) fetchlog.Entry {
	e := fetchlog.Entry{Key: key, At: start, Kind: kind, Node: n.id, DurationMs: n.clk.Now().Sub(start).Milliseconds()}
	switch {
	case err != nil:
		e.Result, e.Error, e.ErrorClass = fetchlog.ResultFailed, err.Error(), PublicClass(err).String()
		if errors.Is(err, ErrCancelled) {
			e.Result = fetchlog.ResultCancelled
		}
	default:
		if kind == "check" {
			e.Kind = KindOf(true, res) // what the check did: clone, fetch or check
		}
		e.Changed = res.Changed
		e.RefsChanged, e.Refs, e.Moves = refChanges(res.Before, res.After)
		e.Rewrites = rewrites(res.Dropped)
		if res.Before.Head != "" && res.After.Head != res.Before.Head {
			e.Head = &fetchlog.Move{Ref: "HEAD", Old: res.Before.Head, New: res.After.Head}
		}
	}
	return e
}

// rewrites is the fetch log's form of the refs whose old tips a sync
// left behind.
func rewrites(dropped []mirror.RefChange) []fetchlog.Rewrite {
	if len(dropped) == 0 {
		return nil
	}
	out := make([]fetchlog.Rewrite, len(dropped))
	for i, d := range dropped {
		out[i] = fetchlog.Rewrite{Ref: d.Ref, Old: d.Old, New: d.New}
	}
	return out
}
