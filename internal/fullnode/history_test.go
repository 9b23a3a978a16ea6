package fullnode

import (
	"context"
	"testing"

	"github.com/gitfleet/gitfleet/internal/fetchlog"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A partial node's check, as the coordinator's new state of the repository
// tells it, is logged with how long it took: ctl log, ctl show and the
// console read this log.
func TestAnOwnersCheckIsLoggedWithItsDuration(t *testing.T) {
	f := benchFullNode(t, 0)
	const key = "example.org/a/b"
	owner := f.n.ID() + 7 // another node
	f.states([]*fleetv1.RepoState{{Key: key, Url: "https://" + key, Owner: owner, State: "pending"}})
	f.states([]*fleetv1.RepoState{{Key: key, Url: "https://" + key, Owner: owner, State: "ok", Digest: "d1",
		LastCheckMs: 1.7e12, LastDurationMs: 2345}})
	es, _, err := f.flog.List(context.Background(), fetchlog.Query{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Kind != "check" || es[0].Node != owner || es[0].DurationMs != 2345 {
		t.Fatalf("the log of %s: %+v; want the owner's check of 2345 ms", key, es)
	}
	if h := (&backend{f: f}).history(t.Context(), key); len(h) != 1 || h[0].DurationMs != 2345 {
		t.Fatalf("the repository's history (ctl show): %+v", h)
	}
}
