package fullnode

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/pullplan"
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A pull asks the upstream for its refs while it fetches from the owner,
// not after: the owner here answers git's commands only once the upstream
// has been listed (or after a long while), so a pull that lists the
// upstream only after the fetch waits that while. The pull is still
// verified: the mirror holds the upstream's refs, and the listing is
// returned as seen, for verified_at.
func TestAPullListsTheUpstreamWhileItFetchesFromTheOwner(t *testing.T) {
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("c", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	const patience = 30 * time.Second
	listedFirst := make(chan bool, 8)
	git := &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Resolve: func(repokey.Key) (string, bool) {
		return filepath.Join(up.Dir, "c.git"), true
	}}
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/git-upload-pack") && r.Method == http.MethodPost {
			// git's commands (the ref listing, the pack): held until the
			// upstream has been listed.
			deadline := time.Now().Add(patience)
			for up.Listings("c") == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			listedFirst <- up.Listings("c") > 0
		}
		git.ServeHTTP(w, r)
	}))
	t.Cleanup(owner.Close)

	f, err := New(Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), AllowPrivate: true}},
		slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.n.TestHooks().Close)
	k, _, err := repokey.Normalize(up.RepoURL("c"), repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	key := k
	want, err := up.Refs("c")
	if err != nil {
		t.Fatal(err)
	}
	st := &fleetv1.RepoState{Key: k.String(), Url: up.RepoURL("c"), Owner: 2, Digest: "the owner's"}
	res, seen, refused, err := f.pullVerified(context.Background(), key, st, 2, owner.URL+"/127.0.0.1/c.git")
	if err != nil || refused != nil {
		t.Fatalf("pull: %v (refused: %v)", err, refused)
	}
	select {
	case first := <-listedFirst:
		if !first {
			t.Fatalf("the owner held its pack %v and the upstream was still not listed: the pull lists it only after the fetch", patience)
		}
	default:
		t.Fatal("the owner was never asked for a pack")
	}
	if !res.Cloned || len(res.After.Refs) != len(want) {
		t.Fatalf("the pull gave %+v, want a clone of %v", res.After.Refs, want)
	}
	for ref, id := range want {
		if ref != "HEAD" && res.After.Refs[ref] != id {
			t.Errorf("%s is %q, the upstream has %s", ref, res.After.Refs[ref], id)
		}
	}
	if !seen.ok || seen.at.IsZero() {
		t.Fatalf("the pull's upstream listing is not returned as seen: %+v", seen)
	}
}

// On the full tier, a first pull of a repository that no other replica
// holds yet (the coordinator lists each in replica_states: a fleet's
// start, or every replica new) comes from the owner at once: it neither
// lists the peers nor waits for a peer copy's slot, which would pace the
// whole first mirror at --full-move-concurrency. One that another replica
// holds is copied from it.
func TestAFirstPullThatNoPeerHoldsComesFromTheOwner(t *testing.T) {
	const self, peer = 3, 5
	const nobody, held = "h.example/a/new", "h.example/a/held"
	f := tierNode(t, self, "", held, self, peer)
	newTier(t, f, map[uint32]http.Handler{peer: http.NotFoundHandler()})
	f.states([]*fleetv1.RepoState{{Key: nobody, Url: "https://" + nobody, Owner: 99, State: "ok", Digest: "d1", LastCheckMs: 1e12,
		Replicas: []uint32{self, peer}, ReplicaStates: []*fleetv1.ReplicaState{{Node: self}, {Node: peer}}}})
	got := map[repokey.Key]pullplan.Source{}
	for {
		k, _, src, ok := f.nextPull(f.clk.Now())
		if !ok {
			break
		}
		got[k] = src
	}
	if src, ok := got[nobody]; !ok || src != pullplan.FromOwner {
		t.Errorf("a repository no peer holds: pulled %v from %v, want from the owner", ok, src)
	}
	if src, ok := got[held]; !ok || src != pullplan.FromPeer {
		t.Errorf("a repository the peer holds: pulled %v from %v, want from the peer", ok, src)
	}
}
