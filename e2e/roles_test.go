package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/ring"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// rolesFleet is a coordinator and a full node with an API token; with
// partial, the full node fetches nothing itself (--capacity 0) and a
// partial node holds every repository, so that what the full node serves
// comes through that node's tunnel.
func rolesFleet(t *testing.T, repos []int, partial bool) *fleet {
	t.Helper()
	f := newFleet(t)
	f.seed(repos, fmt.Sprintf("%d repositories", len(repos)))
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	if partial {
		f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--capacity", "0")
		f.startNode("partial-1", "partial")
	} else {
		f.startFull()
	}
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	return f
}

// refused checks that err is a PermissionDenied that says want.
func refused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want PermissionDenied saying %q", what, err, want)
	}
}

// runBinary runs gitfleet with args until it exits (at most a minute)
// and returns its output and how it ended.
func runBinary(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gitfleet %v did not exit:\n%s", args, out)
	}
	return string(out), err
}

func TestAVolunteerCannotRegisterAsAFullNodeWithTheJoinToken(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	repos := seq(0, 4)
	f := rolesFleet(t, repos, false)

	h := newHostile(t, f.grpc)
	full := fleetv1.Mode_MODE_FULL
	refused(t, "full with the join token", h.register(&fleetv1.RegisterRequest{Mode: full, JoinToken: f.token, Name: "evil-full"}), "full token refused")
	refused(t, "full with the join token as full token", h.register(&fleetv1.RegisterRequest{Mode: full, JoinToken: f.token, FullToken: f.token}), "full token refused")
	refused(t, "full with a guessed full token", h.register(&fleetv1.RegisterRequest{Mode: full, FullToken: "e2e-full-token-guess"}), "full token refused")
	// A volunteer admitted as a partial node cannot turn itself full.
	h.join(f.token)
	refused(t, "a partial node re-registering as full", h.register(&fleetv1.RegisterRequest{Mode: full, NodeId: h.ID, NodeSecret: h.Secret}), "full token refused")

	// The stock binary says what is missing, and stops.
	out, err := runBinary(t, "node", "--mode", "full", "--data", t.TempDir(), "--coordinator", f.grpc, "--join-token", f.token,
		"--http", freeAddr(t), "--tunnel", freeAddr(t))
	if err == nil || !strings.Contains(out, "--full-token") {
		t.Errorf("a full node with the join token only: %v\n%s", err, out)
	}

	nodes, err := apiNodes(f.base)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Mode == "full" && n.Name != "full" {
			t.Errorf("a refused full node is in the fleet: %+v", n)
		}
	}
	if err := f.servedLikeUpstream(repos); err != nil {
		t.Fatal(err)
	}
}

func TestAPartialNodeCannotCallAnyAdminRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	repos := seq(0, 4)
	f := rolesFleet(t, repos, false)
	fullID := f.nodeID("full")
	for _, name := range []string{"extra/planted", "extra/operators"} {
		if err := f.up.Create(name, []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}

	h := newHostile(t, f.grpc)
	h.join(f.token)
	ctx, cancel := h.as()
	defer cancel()
	calls := map[string]func() error{
		"AddRepo": func() error {
			_, err := h.client.AddRepo(ctx, &fleetv1.AddRepoRequest{Url: f.up.RepoURL("extra/planted")})
			return err
		},
		"RemoveRepo": func() error {
			_, err := h.client.RemoveRepo(ctx, &fleetv1.RemoveRepoRequest{Key: f.key(0)})
			return err
		},
		"FetchNow": func() error {
			_, err := h.client.FetchNow(ctx, &fleetv1.FetchNowRequest{Key: f.key(1)})
			return err
		},
		"ListNodes": func() error {
			_, err := h.client.ListNodes(ctx, &fleetv1.ListNodesRequest{})
			return err
		},
		"ConfirmPurge": func() error {
			_, err := h.client.ConfirmPurge(ctx, &fleetv1.ConfirmPurgeRequest{})
			return err
		},
		"CatalogStatus": func() error {
			_, err := h.client.CatalogStatus(ctx, &fleetv1.CatalogStatusRequest{})
			return err
		},
		"RevokeNode": func() error {
			_, err := h.client.RevokeNode(ctx, &fleetv1.RevokeNodeRequest{NodeId: fullID, Reason: "hostile"})
			return err
		},
	}
	for name, rpc := range calls {
		refused(t, name+" as a partial node", rpc(), "only full nodes admitted with the full token")
	}
	// Nor with the full node's ID and the volunteer's own secret.
	impostor := &hostile{t: t, client: h.client, ID: fullID, Secret: h.Secret}
	ictx, icancel := impostor.as()
	defer icancel()
	if _, err := h.client.RemoveRepo(ictx, &fleetv1.RemoveRepoRequest{Key: f.key(2)}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("RemoveRepo under the full node's ID: %v, want Unauthenticated", err)
	}

	// The operator's own change goes through the same session to the full
	// node after anything the refused calls could have done: once it is
	// served, a removal or an addition would have been too.
	operators := strings.TrimPrefix(strings.TrimSuffix(f.up.RepoURL("extra/operators"), ".git"), "http://")
	if code := call(t, "POST", f.base+"/api/v1/repos", apiToken, strings.NewReader(`{"url": "`+f.up.RepoURL("extra/operators")+`"}`), nil); code != 201 {
		t.Fatalf("operator's add: %d", code)
	}
	eventually(t, 60*time.Second, "the operator's repository is served", func() error {
		want, err := f.up.Refs("extra/operators")
		if err != nil {
			return err
		}
		got, err := lsRemote(f.base + "/" + operators + ".git")
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("serves %v, upstream has %v", got, want)
		}
		return nil
	})
	// Adding it again answers with what the mirror knows of it, not as
	// a new repository.
	eventually(t, 60*time.Second, "a second add of the served repository answers ok and served", func() error {
		var again struct {
			State  string `json:"state"`
			Served bool   `json:"served"`
		}
		body := strings.NewReader(`{"url": "` + f.up.RepoURL("extra/operators") + `"}`)
		if code := call(t, "POST", f.base+"/api/v1/repos", apiToken, body, &again); code != 200 || again.State != "ok" || !again.Served {
			return fmt.Errorf("%d state %q served %v", code, again.State, again.Served)
		}
		return nil
	})
	if err := f.servedLikeUpstream(repos); err != nil {
		t.Fatalf("after the refused calls: %v", err)
	}
	planted := strings.TrimPrefix(strings.TrimSuffix(f.up.RepoURL("extra/planted"), ".git"), "http://")
	if refs, err := lsRemote(f.base + "/" + planted + ".git"); err == nil {
		t.Errorf("the repository a volunteer tried to add is served: %v", refs)
	}
	nodes, err := apiNodes(f.base)
	if err != nil {
		t.Fatal(err)
	}
	if n := nodes[fullID]; n.State != "alive" {
		t.Errorf("the full node after a volunteer's RevokeNode: %+v", n)
	}
}

// joinTokenProof is the tunnel proof of the former scheme: an HMAC of the
// node ID under the join token, which every volunteer could make.
func joinTokenProof(joinToken string, id uint32) string {
	m := hmac.New(sha256.New, []byte(joinToken))
	fmt.Fprintf(m, "gitfleet-tunnel:%d", id)
	return hex.EncodeToString(m.Sum(nil))
}

func TestAVolunteerCannotOpenATunnelAsAnotherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	repos := seq(0, 4)
	f := rolesFleet(t, repos, true)
	victim := f.nodeID("partial-1")

	h := newHostile(t, f.grpc)
	h.join(f.token)
	// The hostile's own tunnel is admitted: its code speaks the protocol.
	own := h.tunnel(f.tunnelAddr, h.ID, h.ownProof(h.ID), forged)
	eventually(t, 30*time.Second, "the hostile's own tunnel is up", func() error {
		if own.log.count("tunnel up") == 0 {
			return fmt.Errorf("log: %s", own.log)
		}
		return nil
	})
	own.stop()
	// Under the victim's ID: a proof from the hostile's own secret, and
	// one from the join token (the former scheme).
	impostors := []*hostileTunnel{
		h.tunnel(f.tunnelAddr, victim, h.ownProof(victim), forged),
		h.tunnel(f.tunnelAddr, victim, joinTokenProof(f.token, victim), forged),
	}
	eventually(t, 30*time.Second, "each impostor refused three times", func() error {
		for i, it := range impostors {
			if n := it.log.count("not node " + fmt.Sprint(victim) + "'s"); n < 3 {
				return fmt.Errorf("impostor %d refused %d times; log: %s", i, n, it.log)
			}
		}
		return nil
	})
	for i, it := range impostors {
		if it.log.count("tunnel up") > 0 {
			t.Errorf("impostor %d's tunnel was admitted: %s", i, it.log)
		}
	}

	// The real node's tunnel stays, and what it mirrors keeps being served.
	for _, i := range repos {
		if _, err := f.up.Commit(f.name(i), "main"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "new commits served through the real node's tunnel", func() error { return f.servedLikeUpstream(repos) })
	if n := f.procs["partial-1"].count("tunnel down"); n != 0 {
		t.Errorf("the real node's tunnel went down %d times while impostors tried its ID", n)
	}
}

func TestRevokingALiveNodeCutsItOffAndRePlacesItsRepositories(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	// The full node and the partial nodes register as 1, 2 and 3 in some
	// order, then the hostile as 4; the full node (--capacity 0) is no
	// member. Whichever members the others are, the hostile has a share.
	sets := [][]ring.Member{membersOf(2, 3, 4), membersOf(1, 3, 4), membersOf(1, 2, 4)}
	repos := f.reposPlacing(10, 1, sets...)
	f.seed(repos, fmt.Sprintf("%d repositories", len(repos)))
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--capacity", "0")
	f.startNode("partial-1", "partial")
	f.startNode("partial-2", "partial")
	remaining := f.nodeID("partial-1")
	second := f.nodeID("partial-2")

	// The hostile joins before the warm-up ends, keeps a live session and
	// a tunnel, and takes its share of repositories (which it never
	// fetches).
	h := newHostile(t, f.grpc)
	h.join(f.token)
	f.placedAsComputed(membersOf(remaining, second, h.ID), sets...)
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	sess, err := h.session(sctx)
	if err != nil {
		t.Fatal(err)
	}
	tun := h.tunnel(f.tunnelAddr, h.ID, h.ownProof(h.ID), forged)
	eventually(t, 60*time.Second, "the hostile holds repositories and a tunnel", func() error {
		if sess.assigned() == 0 || tun.log.count("tunnel up") == 0 {
			return fmt.Errorf("%d repositories; tunnel log: %s", sess.assigned(), tun.log)
		}
		return nil
	})
	held := sess.assigned()

	began := time.Now()
	out, err := runBinary(t, "ctl", "--server", f.base, "--token", apiToken, "nodes", "revoke", fmt.Sprint(h.ID), "--reason", "serves forged history")
	returned := time.Now()
	if err != nil || !strings.Contains(out, fmt.Sprintf("revoked node %d", h.ID)) {
		t.Fatalf("ctl nodes revoke: %v\n%s", err, out)
	}
	eventually(t, 60*time.Second, "the hostile's session is cut", func() error {
		select {
		case <-sess.ended:
			return nil
		default:
			return fmt.Errorf("still open")
		}
	})
	t.Logf("session cut %v after the ctl command started (the command took %v)", sess.at.Sub(began).Round(time.Millisecond), returned.Sub(began).Round(time.Millisecond))
	refused(t, "the session's end", sess.err, "was revoked: serves forged history")
	eventually(t, 60*time.Second, "the hostile's tunnel is cut and refused", func() error {
		if tun.log.count("tunnel down") == 0 || tun.log.count(fmt.Sprintf("node %d was revoked", h.ID)) == 0 {
			return fmt.Errorf("tunnel log: %s", tun.log)
		}
		return nil
	})
	nodes, err := apiNodes(f.base)
	if err != nil {
		t.Fatal(err)
	}
	if n := nodes[h.ID]; n.State != "revoked" || n.RevokedReason != "serves forged history" {
		t.Errorf("the API shows the revoked node as %+v", n)
	}

	// Its credential is refused from then on.
	refused(t, "register with the revoked credential", h.register(&fleetv1.RegisterRequest{NodeId: h.ID, NodeSecret: h.Secret, JoinToken: f.token, Mode: fleetv1.Mode_MODE_PARTIAL}), "was revoked")
	if _, err := h.session(context.Background()); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a session with the revoked credential: %v", err)
	}
	ctx, cancel := h.as()
	defer cancel()
	_, err = h.client.ListNodes(ctx, &fleetv1.ListNodesRequest{})
	refused(t, "an RPC with the revoked credential", err, "was revoked")

	eventually(t, 90*time.Second, fmt.Sprintf("the %d repositories the hostile held are served", held), func() error { return f.servedLikeUpstream(repos) })

	// A real node, revoked through the API, stops and says why.
	p2 := f.procs["partial-2"]
	p2.stopped.Store(true) // its end is what this part waits for
	if code := call(t, "POST", fmt.Sprintf("%s/api/v1/nodes/%d/revoke", f.base, second), apiToken, strings.NewReader(`{"reason": "disk stolen"}`), nil); code != 200 {
		t.Fatalf("POST revoke: %d", code)
	}
	eventually(t, 30*time.Second, "the revoked node's process ends, saying why", func() error {
		select {
		case <-p2.done:
		default:
			return fmt.Errorf("still running")
		}
		if p2.count(fmt.Sprintf("node %d was revoked: disk stolen", second)) == 0 {
			return fmt.Errorf("it ended (%v) without saying it was revoked", p2.exit)
		}
		return nil
	})

	// Every repository moves to the remaining node (which confirms its
	// clone), and is served.
	eventually(t, 90*time.Second, "every repository owned by the remaining node", func() error {
		own, err := owners(f, repos)
		if err != nil {
			return err
		}
		for key, o := range own {
			if o != remaining {
				return fmt.Errorf("%s is owned by node %d, want the remaining node %d", key, o, remaining)
			}
		}
		return nil
	})
	if err := f.servedLikeUpstream(repos); err != nil {
		t.Fatal(err)
	}
}

func TestJoinTokenRotationKeepsAdmittedNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	repos := seq(0, 4)
	f := rolesFleet(t, repos, true)
	admitted := f.nodeID("partial-1")
	old := f.token

	f.procs["coordinator"].kill()
	f.token = "e2e-rotated-token"
	f.startCoordinator()

	// The admitted node (started with the old token) keeps its identity
	// and keeps mirroring.
	for _, i := range repos {
		if _, err := f.up.Commit(f.name(i), "main"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "new commits served after the rotation", func() error { return f.servedLikeUpstream(repos) })
	if id := f.nodeID("partial-1"); id != admitted {
		t.Errorf("the admitted node came back as node %d, want %d", id, admitted)
	}
	if n := f.procs["partial-1"].count("session open"); n < 2 {
		t.Errorf("the admitted node opened %d sessions: it did not come back to the restarted coordinator", n)
	}
	// A refusal of its token, not a "connection refused" of its retries
	// while the coordinator was down.
	if n := f.procs["partial-1"].count("token refused"); n != 0 {
		t.Errorf("the admitted node was refused %d times", n)
	}

	// A new node with the old token is refused; with the new one, let in.
	out, err := runBinary(t, "node", "--mode", "partial", "--data", t.TempDir(), "--coordinator", f.grpc, "--join-token", old)
	if err == nil || !strings.Contains(out, "join token refused") {
		t.Errorf("a new node with the old token: %v\n%s", err, out)
	}
	h := newHostile(t, f.grpc)
	refused(t, "register with the old token", h.register(&fleetv1.RegisterRequest{JoinToken: old, Mode: fleetv1.Mode_MODE_PARTIAL}), "join token refused")
	h.join(f.token)
}
