package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/tunnel"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// hostileTunnelProof is what the hostile node shows to open its tunnel,
// computed the way a genuine partial node does. It is the one place that
// knows how tunnels are authenticated.
func hostileTunnelProof(_ string, reg *fleetv1.RegisterResponse) string {
	return fleetv1.TunnelProof(fleetv1.SecretHash(reg.GetNodeSecret()), reg.GetNodeId())
}

// forger is a hostile partial node written as test code: it joins with the join
// token, takes the repositories it is given, and serves through its tunnel
// bare repositories that it may then forge, while it reports to the
// coordinator whatever digest it likes.
type forger struct {
	t      *testing.T
	ctx    context.Context
	id     uint32
	dir    string // its bare repositories: <dir>/<key>.git
	git    *gitcmd.Runner
	stream fleetv1.Coordinator_SessionClient

	sendMu sync.Mutex // gRPC streams take one Send at a time
	mu     sync.Mutex
	urls   map[string]string // assigned key -> upstream URL
	opened map[string]bool   // tunnel addresses
	plain  http.Handler      // its repositories over git's smart HTTP
	serve  http.Handler      // what its tunnel serves: plain unless set (guarded by mu)
	// onCheck answers the coordinator's requests for a check (a webhook's,
	// an API fetch's): nil ignores them (guarded by mu).
	onCheck func(key, taskID string)
}

// serveWith makes the node's tunnel serve with hd from now on.
func (h *forger) serveWith(hd http.Handler) {
	h.mu.Lock()
	h.serve = hd
	h.mu.Unlock()
}

func (h *forger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	hd := h.serve
	h.mu.Unlock()
	hd.ServeHTTP(w, r)
}

func startHostile(t *testing.T, f *fleet) *forger {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := grpc.NewClient(f.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); conn.Close(); wg.Wait() })
	client := fleetv1.NewCoordinatorClient(conn)
	var reg *fleetv1.RegisterResponse
	eventually(t, 30*time.Second, "hostile node registered", func() error {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		reg, err = client.Register(rctx, &fleetv1.RegisterRequest{JoinToken: f.token, Name: "hostile",
			Mode: fleetv1.Mode_MODE_PARTIAL, Capacity: 1, Version: "hostile"})
		return err
	})
	h := &forger{t: t, ctx: ctx, id: reg.GetNodeId(), dir: t.TempDir(), git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}),
		urls: map[string]string{}, opened: map[string]bool{}}
	if h.stream, err = client.Session(ctx); err != nil {
		t.Fatal(err)
	}
	h.send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Hello{Hello: &fleetv1.Hello{NodeId: reg.GetNodeId(), NodeSecret: reg.GetNodeSecret()}}})
	h.send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Inventory{Inventory: &fleetv1.Inventory{Done: true}}})
	h.plain = &gitserve.Handler{Git: h.git, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Resolve: func(key repokey.Key) (string, bool) {
		p := h.path(key.String())
		_, err := os.Stat(p)
		return p, err == nil
	}}
	h.serve = h.plain
	proof := hostileTunnelProof(f.token, reg)
	wg.Go(func() {
		for {
			msg, err := h.stream.Recv()
			if err != nil {
				return
			}
			switch m := msg.Msg.(type) {
			case *fleetv1.CoordinatorMessage_Welcome:
				for _, a := range m.Welcome.GetTunnelAddrs() {
					h.mu.Lock()
					fresh := !h.opened[a]
					h.opened[a] = true
					h.mu.Unlock()
					if fresh {
						cfg := tunnel.ClientConfig{Addr: a, NodeID: h.id, Proof: proof, MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second}
						wg.Go(func() { _ = tunnel.Serve(ctx, cfg, h) })
					}
				}
			case *fleetv1.CoordinatorMessage_Assign:
				for _, r := range m.Assign.GetRepos() {
					h.take(r.GetKey(), r.GetUrl())
				}
			case *fleetv1.CoordinatorMessage_CheckNow:
				h.mu.Lock()
				check := h.onCheck
				h.mu.Unlock()
				if check != nil && !m.CheckNow.GetCancel() {
					wg.Go(func() { check(m.CheckNow.GetKey(), m.CheckNow.GetTaskId()) })
				}
			}
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			h.send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Heartbeat{Heartbeat: &fleetv1.Heartbeat{}}})
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	})
	return h
}

func (h *forger) send(m *fleetv1.NodeMessage) {
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	_ = h.stream.Send(m) // a broken session shows as the test's own failure
}

func (h *forger) path(key string) string {
	return filepath.Join(h.dir, filepath.FromSlash(key)+".git")
}

// take mirrors a repository it was given, honestly, and reports it.
func (h *forger) take(key, url string) {
	h.mu.Lock()
	_, known := h.urls[key]
	h.urls[key] = url
	h.mu.Unlock()
	if known {
		return
	}
	if err := gittest.Git("", "clone", "-q", "--mirror", url, h.path(key)); err != nil {
		// The catalog lists an upstream that does not exist: say so, as any node would.
		h.send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Results{Results: &fleetv1.Results{Results: []*fleetv1.CheckResult{{
			Key: key, CheckedAtMs: time.Now().UnixMilli(), Error: err.Error(), ErrorClass: "not-found"}}}}})
		return
	}
	h.report(key, "")
}

// report tells the coordinator that key was checked, with digest, or with
// the digest of what the node serves when digest is "".
func (h *forger) report(key, digest string) {
	if digest == "" {
		refs, err := h.git.LocalRefs(h.ctx, h.path(key))
		if err != nil {
			h.t.Errorf("hostile node: %v", err)
			return
		}
		digest = refs.Digest()
	}
	h.send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Results{Results: &fleetv1.Results{Results: []*fleetv1.CheckResult{{
		Key: key, CheckedAtMs: time.Now().UnixMilli(), Ok: true, Fetched: true, Changed: true, Cloned: true, Digest: digest}}}}})
}

// forge commits on branch in the node's own copy and returns the new tip.
func (h *forger) forge(key, branch string) string {
	h.t.Helper()
	wt := filepath.Join(h.t.TempDir(), "forge")
	if err := gittest.Git("", "clone", "-q", "-b", branch, h.path(key), wt); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt, "file.txt"), []byte("a commit the upstream never had\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := gittest.Git(wt, "commit", "-q", "-am", "forged"); err != nil {
		h.t.Fatal(err)
	}
	if err := gittest.Git(wt, "push", "-q", "origin", branch); err != nil {
		h.t.Fatal(err)
	}
	out, err := gittest.Output(wt, "rev-parse", "HEAD")
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// hostileFleet is a coordinator and a full node that owns nothing
// (--capacity 0; fullArgs are its further flags), as processes, and the
// hostile node, which therefore owns the one repository; it returns once
// the full node serves the hostile node's (so far honest) copy.
func hostileFleet(t *testing.T, extraCommit bool, fullArgs ...string) (*fleet, *forger) {
	t.Helper()
	f := newFleet(t)
	f.seed([]int{0}, "one repository")
	if extraCommit {
		if _, err := f.up.Commit(f.name(0), "main"); err != nil {
			t.Fatal(err)
		}
	}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", append([]string{"--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--capacity", "0"}, fullArgs...)...)
	h := startHostile(t, f)
	eventually(t, 90*time.Second, "the hostile node's honest copy served", func() error { return publicLikeUpstream(f) })
	return f, h
}

// publicLikeUpstream compares, with git ls-remote, what the full node
// serves with what the upstream has.
func publicLikeUpstream(f *fleet) error {
	want, err := lsRemote(f.up.RepoURL(f.name(0)))
	if err != nil {
		return err
	}
	got, err := lsRemote(f.base + "/" + f.key(0) + ".git")
	if err != nil {
		return err
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("the full node serves %v, the upstream has %v", got, want)
	}
	return nil
}

// refusedPull is what the full node logs once it has refused a pull and
// fetched the repository from the upstream instead.
const refusedPull = "fetched from the upstream after a mismatch"

// refusedThroughout waits until the full node has refused n pulls from the
// hostile node and fetched from the upstream instead, checking at every
// step that the public mirror equals the upstream.
func refusedThroughout(t *testing.T, f *fleet, n int) {
	t.Helper()
	eventually(t, 60*time.Second, "the full node refused the pull", func() error {
		if err := publicLikeUpstream(f); err != nil {
			t.Fatalf("the public mirror left the upstream: %v", err)
		}
		if c := f.procs["full"].count(refusedPull); c < n {
			return fmt.Errorf("%d pulls refused, want %d", c, n)
		}
		return nil
	})
	if err := publicLikeUpstream(f); err != nil {
		t.Fatalf("the public mirror left the upstream: %v", err)
	}
}

// mismatchesOf is the count GET /api/v1/nodes shows for node id.
func mismatchesOf(t *testing.T, f *fleet, id uint32) uint64 { return nodeCount(t, f, id, "mismatches") }

// nodeCount is the count field of node id in GET /api/v1/nodes.
func nodeCount(t *testing.T, f *fleet, id uint32, field string) uint64 {
	t.Helper()
	var body struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if code := call(t, "GET", f.base+"/api/v1/nodes", apiToken, nil, &body); code != http.StatusOK {
		t.Fatalf("GET /api/v1/nodes: %d", code)
	}
	for _, n := range body.Nodes {
		if n["id"] == float64(id) {
			v, ok := n[field].(float64)
			if !ok {
				t.Fatalf("GET /api/v1/nodes has no %s field", field)
			}
			return uint64(v)
		}
	}
	t.Fatalf("node %d not listed", id)
	return 0
}

func TestHostileNodeServingForgedHistoryIsRefusedAndCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f, h := hostileFleet(t, false)
	key := f.key(0)
	forgedAt := time.Now()
	forged := h.forge(key, "main")
	h.report(key, "")
	refusedThroughout(t, f, 1)
	eventually(t, 30*time.Second, "the forged tip counted against the hostile node", func() error {
		if n := mismatchesOf(t, f, h.id); n < 1 {
			return fmt.Errorf("mismatches %d", n)
		}
		return nil
	})
	served, err := lsRemote(f.base + "/" + key + ".git")
	if err != nil {
		t.Fatal(err)
	}
	if served["refs/heads/main"] == forged {
		t.Fatal("the forged commit is served")
	}
	resp, err := http.Get(f.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("gitfleet_node_mismatches_total{node=\"%d\"} ", h.id); !strings.Contains(string(metrics), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
	if f.procs["full"].count("forged tip") == 0 {
		t.Fatal("the full node did not log the forged tip")
	}
	// The public history shows the pull refused, with its class, not ok.
	eventually(t, 30*time.Second, "the refused pull in the public history", func() error {
		var repo struct {
			History []logEntry `json:"history"`
		}
		if err := getJSON(f.base+"/api/v1/repos/"+key, &repo); err != nil {
			return err
		}
		refused := false
		for _, e := range repo.History {
			at, err := time.Parse(time.RFC3339Nano, e.At)
			if err != nil {
				t.Fatalf("history entry at %q: %v", e.At, err)
			}
			if e.Kind != "pull" || e.From != h.id || at.Before(forgedAt) {
				continue // the honest copy's pull came before
			}
			if e.Result == "ok" {
				t.Fatalf("a pull of the forged tip shows as ok: %+v", e)
			}
			refused = refused || e.Result == "failed" && e.ErrorClass == "forged refs"
		}
		if !refused {
			return fmt.Errorf("no refused pull from node %d in %+v", h.id, repo.History)
		}
		return nil
	})

	t.Run("the loopback proxy into the tunnels refuses a request without the secret", func(t *testing.T) {
		log, err := os.ReadFile(f.procs["full"].log)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`proxy=(127\.0\.0\.1:[0-9]+)`).FindSubmatch(log)
		if m == nil {
			t.Fatal("the full node did not log its proxy's address")
		}
		// What any user of the machine could try: the hostile node's repository through its tunnel.
		resp, err := http.Get(fmt.Sprintf("http://%s/%d/%s.git/info/refs?service=git-upload-pack", m[1], h.id, key))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d, want 403", resp.StatusCode)
		}
	})
}

func TestHostileNodeServingAnEmptyRepositoryIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f, h := hostileFleet(t, false)
	key := f.key(0)
	refs, err := gittest.RefsOf(h.path(key))
	if err != nil {
		t.Fatal(err)
	}
	for ref := range refs {
		if err := gittest.Git(h.path(key), "update-ref", "-d", ref); err != nil {
			t.Fatal(err)
		}
	}
	// An honest empty repository has digest "", which the full node never
	// pulls; the hostile node claims some other content instead.
	h.report(key, "0123456789abcdef0123456789abcdef")
	refusedThroughout(t, f, 1)
	if n := mismatchesOf(t, f, h.id); n != 0 {
		t.Fatalf("an emptied repository counted as %d forged tips: it has no tip", n)
	}
}

func TestHostileNodeServingRewoundHistoryIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f, h := hostileFleet(t, true)
	key := f.key(0)
	if err := gittest.Git(h.path(key), "update-ref", "refs/heads/main", "refs/heads/main~1"); err != nil {
		t.Fatal(err)
	}
	h.report(key, "")
	refusedThroughout(t, f, 1)
	// The old tip is a commit the upstream had: not a forgery.
	if n := mismatchesOf(t, f, h.id); n != 0 {
		t.Fatalf("a rewind to the upstream's own commit counted as %d forged tips", n)
	}
}
