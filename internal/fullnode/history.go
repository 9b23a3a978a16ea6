package fullnode

import (
	"context"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// The full node's entries in the fetch log (the runtime writes its own
// work's: node.WorkEntry), and the log as the API reads it.

// refusedEntry is the fetch log's entry of a pull of key from r's owner,
// started at start on node and refused (pullverify.go).
func refusedEntry(key string, node uint32, start time.Time, r *pullRefusal) fetchlog.Entry {
	msg := r.Error()
	return fetchlog.Entry{Key: key, At: start, Kind: "pull", Node: node, From: r.owner, Result: fetchlog.ResultFailed,
		DurationMs: r.at.Sub(start).Milliseconds(), Error: msg, ErrorClass: r.class().String()}
}

// ownerCheck is the fetch log's entry of a check that another node (r's
// owner) made, as the coordinator's new state r of the repository tells
// it, oldDigest being the digest before.
func ownerCheck(r *fleetv1.RepoState, oldDigest string) fetchlog.Entry {
	e := fetchlog.Entry{Key: r.GetKey(), At: time.UnixMilli(r.GetLastCheckMs()), Kind: "check", Node: r.GetOwner(),
		Changed: r.GetDigest() != oldDigest, DurationMs: r.GetLastDurationMs()}
	if msg := r.GetLastError(); msg != "" {
		e.Result, e.Error, e.ErrorClass = fetchlog.ResultFailed, msg, repostate.ClassFromWire(r.GetClass()).OrOther().String()
		if strings.Contains(msg, node.ErrCancelled.Error()) {
			e.Result = fetchlog.ResultCancelled
		}
	}
	return e
}

// renameEntry is the fetch log's entry of a repository the coordinator
// newly says is renamed (r), as a full node that knew it before hears it
// at now.
func renameEntry(r *fleetv1.RepoState, now time.Time) fetchlog.Entry {
	at := now
	if ms := r.GetStateSinceMs(); ms > 0 {
		at = time.UnixMilli(ms)
	}
	return fetchlog.Entry{Key: r.GetKey(), At: at, Kind: "rename", Result: fetchlog.ResultOK, RenamedTo: r.GetRenamedTo()}
}

// historyLen is how many of the newest log entries a repository's detail
// shows (GET /api/v1/repos/{key}).
const historyLen = 20

// FetchLog reads the full node's fetch log.
func (b *backend) FetchLog(ctx context.Context, q fetchlog.Query) ([]fetchlog.Entry, string, error) {
	return b.f.flog.List(ctx, q)
}

// history is the newest part of key's log, as the repository's detail
// shows it.
func (b *backend) history(ctx context.Context, key string) []api.HistoryEntry {
	es, _, err := b.f.flog.List(ctx, fetchlog.Query{Key: key, Limit: historyLen})
	if err != nil {
		b.f.log.Warn("fetch log: read failed", "key", key, "err", err)
		return nil
	}
	out := make([]api.HistoryEntry, 0, len(es))
	for _, e := range es {
		out = append(out, api.HistoryEntry{At: e.At, Kind: e.Kind, Node: e.Node, Changed: e.Changed, DurationMs: e.DurationMs,
			Error: e.Error, Result: e.Result, From: e.From, RefsChanged: e.RefsChanged, Refs: e.Refs, ErrorClass: e.ErrorClass,
			Rewrites: e.Rewrites, RewritesOmitted: e.RewritesOmitted, Head: e.Head, RenamedTo: e.RenamedTo})
	}
	return out
}
