package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// refChanges counts the refs that after created, moved or deleted from
// before, and names the first fetchlog.MaxRefNames of them in order.
func refChanges(before, after gitcmd.Refs) (int, []string) {
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
	return len(names), names[:min(len(names), fetchlog.MaxRefNames)]
}

// workEntry is the fetch log's entry of a sync of key that started at
// start and gave res or err: kind names the work when it succeeded or
// failed ("check" becomes "fetch" or "clone" from what res says).
func (n *Node) workEntry(key, kind string, start time.Time, res mirror.Result, err error) fetchlog.Entry {
	e := fetchlog.Entry{Key: key, At: start, Kind: kind, Node: n.id, DurationMs: n.clk.Now().Sub(start).Milliseconds()}
	switch {
	case err != nil:
		e.Result, e.Error, e.ErrorClass = fetchlog.ResultFailed, err.Error(), api.PublicError(err.Error())
		if errors.Is(err, errCancelled) {
			e.Result = fetchlog.ResultCancelled
		}
	default:
		if kind == "check" {
			e.Kind = kindOf(true, res) // what the check did: clone, fetch or check
		}
		e.Changed = res.Changed
		e.RefsChanged, e.Refs = refChanges(res.Before, res.After)
		e.Rewrites = rewrites(res.Dropped)
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

// refusedEntry is the fetch log's entry of a pull of key from r's owner,
// started at start on node and refused (pullcheck.go).
func refusedEntry(key string, node uint32, start time.Time, r *pullRefusal) fetchlog.Entry {
	msg := r.Error()
	return fetchlog.Entry{Key: key, At: start, Kind: "pull", Node: node, From: r.owner, Result: fetchlog.ResultFailed,
		DurationMs: r.at.Sub(start).Milliseconds(), Error: msg, ErrorClass: api.PublicError(msg)}
}

// ownerCheck is the fetch log's entry of a check that another node (r's
// owner) made, as the coordinator's new state r of the repository tells
// it, oldDigest being the digest before.
func ownerCheck(r *fleetv1.RepoState, oldDigest string) fetchlog.Entry {
	e := fetchlog.Entry{Key: r.GetKey(), At: time.UnixMilli(r.GetLastCheckMs()), Kind: "check", Node: r.GetOwner(),
		Changed: r.GetDigest() != oldDigest}
	if msg := r.GetLastError(); msg != "" {
		e.Result, e.Error, e.ErrorClass = fetchlog.ResultFailed, msg, api.PublicError(msg)
		if strings.Contains(msg, errCancelled.Error()) {
			e.Result = fetchlog.ResultCancelled
		}
	}
	return e
}

// historyLen is how many of the newest log entries a repository's detail
// shows (GET /api/v1/repos/{key}).
const historyLen = 20

var _ api.LogReader = (*backend)(nil)

// FetchLog reads the full node's fetch log.
func (b *backend) FetchLog(ctx context.Context, q fetchlog.Query) ([]fetchlog.Entry, string, error) {
	return b.f.n.flog.List(ctx, q)
}

// history is the newest part of key's log, as the repository's detail
// shows it.
func (b *backend) history(key string) []api.HistoryEntry {
	es, _, err := b.f.n.flog.List(context.Background(), fetchlog.Query{Key: key, Limit: historyLen})
	if err != nil {
		b.f.n.log.Warn("fetch log: read failed", "key", key, "err", err)
		return nil
	}
	out := make([]api.HistoryEntry, 0, len(es))
	for _, e := range es {
		out = append(out, api.HistoryEntry{At: e.At, Kind: e.Kind, Node: e.Node, Changed: e.Changed, DurationMs: e.DurationMs,
			Error: e.Error, Result: e.Result, From: e.From, RefsChanged: e.RefsChanged, Refs: e.Refs, ErrorClass: e.ErrorClass,
			Rewrites: e.Rewrites, RewritesOmitted: e.RewritesOmitted})
	}
	return out
}
