package fullnode

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/node"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/tunnel"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// tier is a relaying full node (ID 3, holding nothing) with the links of
// other full nodes up to it.
type tier struct {
	relay *Node
	base  string // the relaying node's public server
}

// links is what full node f serves through its tunnels: git, and the
// relayed reads.
func links(f *Node) http.Handler { return f.n.TestHooks().TunnelHandler() }

// tierNode is a full node with ID id, API token token, whose view lists
// key with replicas.
func tierNode(t testing.TB, id uint32, token, key string, replicas ...uint32) *Node {
	t.Helper()
	cfg := Config{Config: node.Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), Fetchers: 1}}
	cfg.API.Token = token
	f, err := New(cfg, slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1e9, 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.n.TestHooks().Close)
	f.n.TestHooks().Connect(nil, id, "")
	f.states([]*fleetv1.RepoState{{Key: key, Url: "https://" + key, Owner: 99, State: "ok", Digest: "d1", LastCheckMs: 1e12,
		Replicas: replicas}})
	return f
}

// newTier starts the relaying node's tunnel server and public server, and
// a link to it from each of peers, serving its handler.
func newTier(t testing.TB, relay *Node, peers map[uint32]http.Handler) *tier {
	t.Helper()
	relay.tunnels = tunnel.NewServer(func(uint32, string) error { return nil }, nil, nil)
	relay.relay = relay.newRelay(relay.tunnels)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(peers)+1)
	go func() { _ = relay.tunnels.Serve(ctx, ln); done <- struct{}{} }()
	for id, p := range peers {
		go func() {
			_ = tunnel.Serve(ctx, tunnel.ClientConfig{Addr: ln.Addr().String(), NodeID: id, Proof: "ab"}, p)
			done <- struct{}{}
		}()
	}
	srv := httptest.NewServer(relay.publicHandler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		for range len(peers) + 1 {
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for id := range peers {
		for !relay.tunnels.Connected(id) {
			if time.Now().After(deadline) {
				t.Fatalf("the link of node %d is not up after 30 s", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return &tier{relay: relay, base: srv.URL}
}

// holdMirror puts a mirror of key with one commit on f's disk, held with
// digest d1.
func holdMirror(t testing.TB, f *Node, key string) {
	t.Helper()
	dir := f.mirror.Path(repokey.Key(key))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(cmd.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "--bare", dir)
	tree := run("--git-dir", dir, "hash-object", "-t", "tree", "-w", "/dev/null")
	commit := run("--git-dir", dir, "commit-tree", tree, "-m", "one")
	run("--git-dir", dir, "update-ref", "refs/heads/main", commit)
	f.n.TestHooks().Hold(map[repokey.Key]string{repokey.Key(key): "d1"})
	f.reclass(repokey.Key(key))
}

// get calls path on base with token ("": none).
func get(t testing.TB, base, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// A repository's API reads on a full node that does not hold it are the
// holder's, relayed over the link: its detail says served and shows the
// holder's refs, its fetch log is the holder's. The caller keeps the
// rights it has on the node it called: with that node's token it sees the
// old IDs a force-push left behind; anonymous, or with the holder's own
// token (which the relaying node does not know), or claiming the
// operator's rights in the link's own header, it does not.
func TestARepositorysAPIReadsAreAnsweredByItsReplicaWithTheCallersRights(t *testing.T) {
	const key = "h.example/a/held"
	const relayToken, holderToken = "relay-token", "holder-token"
	holder := tierNode(t, 5, holderToken, key, 5, 6)
	holdMirror(t, holder, key)
	old, moved := strings.Repeat("1", 40), strings.Repeat("2", 40) // a force-push
	holder.flog.Append(fetchlog.Entry{Key: key, At: time.Unix(1e9, 0), Kind: "pull", Node: 5, Result: "ok", Changed: true,
		RefsChanged: 1, Refs: []string{"refs/heads/main"}, Rewrites: []fetchlog.Rewrite{{Ref: "refs/heads/main", Old: old, New: moved}}})
	tr := newTier(t, tierNode(t, 3, relayToken, key, 5, 6), map[uint32]http.Handler{5: links(holder)})

	d, code := detailOf(t, tr.base, key)
	if code != http.StatusOK || !d.Served || d.Refs["refs/heads/main"] == "" || !strings.HasPrefix(d.CloneURL, tr.base+"/") {
		t.Fatalf("detail through a non-holder: %d, served %v, refs %v, clone URL %q; want the holder's, served, its refs, and this node's URL",
			code, d.Served, d.Refs, d.CloneURL)
	}
	for _, c := range []struct {
		path, token string
		sees        bool
	}{
		{"/api/v1/repos/" + key, "", false},
		{"/api/v1/repos/" + key, holderToken, false},
		{"/api/v1/repos/" + key, relayToken, true},
		{"/api/v1/repos/" + key + "/log", "", false},
		{"/api/v1/repos/" + key + "/log", relayToken, true},
		{"/api/v1/log?key=" + key, "", false},
		{"/api/v1/log?key=" + key, relayToken, true},
	} {
		code, body := get(t, tr.base, c.path, c.token)
		if code != http.StatusOK || !strings.Contains(string(body), `"pull"`) {
			t.Errorf("GET %s (token %q): %d, want 200 with the holder's pull\n%s", c.path, c.token, code, body)
		}
		if sees := strings.Contains(string(body), old); sees != c.sees {
			t.Errorf("GET %s (token %q): the old ID of the rewritten ref shown %v, want %v\n%s", c.path, c.token, sees, c.sees, body)
		}
	}
	// A caller that writes the link's own headers gains nothing: the
	// relaying node sends only what it decided.
	req, err := http.NewRequest(http.MethodGet, tr.base+"/api/v1/repos/"+key+"/log", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Gitfleet-Relay-Operator", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || strings.Contains(string(forged), old) {
		t.Errorf("a caller that claims the operator's rights in the link's header: %s, the old ID shown %v; want 200 without it",
			resp.Status, strings.Contains(string(forged), old))
	}
	// Lists stay the relaying node's own.
	if code, body := get(t, tr.base, "/api/v1/repos", ""); code != http.StatusOK || strings.Contains(string(body), `"refs"`) {
		t.Errorf("the list through a non-holder: %d\n%s", code, body)
	}
}

// A replica that answers 404 (it has not pulled the repository yet), or
// whose link fails before it answers, is passed over for the next in
// placement order, for git, the API's detail and the public status and
// badge; with none that answers, git is a 503 with Retry-After and the
// API the relaying node's own view.
func TestARelayPassesOverAReplicaThatDoesNotAnswerForTheNext(t *testing.T) {
	const key = "h.example/a/held"
	const unanswered = "h.example/a/nowhere"
	notYet := tierNode(t, 6, "", key, 6, 7, 5)
	holder := tierNode(t, 5, "", key, 6, 7, 5)
	holdMirror(t, holder, key)
	relay := tierNode(t, 3, "", key, 6, 7, 5)
	for _, f := range []*Node{notYet, holder, relay} {
		f.states([]*fleetv1.RepoState{{Key: unanswered, Url: "https://" + unanswered, Owner: 99, State: "ok", Digest: "d1", Replicas: []uint32{6},
			ReplicaStates: []*fleetv1.ReplicaState{{Node: 6}}}}) // not pulled yet
	}
	// Node 7's link breaks at every request, before any answer.
	breaks := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	tr := newTier(t, relay, map[uint32]http.Handler{6: links(notYet), 7: breaks, 5: links(holder)})

	out, err := exec.Command("git", "ls-remote", tr.base+"/"+key+".git").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "refs/heads/main") {
		t.Fatalf("git ls-remote through a non-holder whose first replicas do not answer: %v\n%s", err, out)
	}
	if d, code := detailOf(t, tr.base, key); code != http.StatusOK || !d.Served {
		t.Errorf("the detail: %d, served %v; want 200 from the holder, served", code, d.Served)
	}
	if code, body := get(t, tr.base, "/-/status/"+key, ""); code != http.StatusOK || !strings.Contains(string(body), `id="status-word">behind`) {
		t.Errorf("the status page: %d, want the holder's\n%s", code, body)
	}
	if code, body := get(t, tr.base, "/-/badge/"+key+".svg", ""); code != http.StatusOK || strings.Contains(string(body), "not mirrored") {
		t.Errorf("the badge: %d, want the holder's\n%s", code, body)
	}

	resp, err := http.Get(tr.base + "/" + unanswered + ".git/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("git for a repository no replica answers for: %s (Retry-After %q), want 503 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if d, code := detailOf(t, tr.base, unanswered); code != http.StatusOK || d.Key != unanswered || d.Served {
		t.Errorf("the detail of a repository no replica answers for: %d %+v, want this node's view (not served)", code, d)
	}
}

// detailOf reads key's API detail through base, anonymously.
func detailOf(t *testing.T, base, key string) (api.RepoDetail, int) {
	t.Helper()
	code, body := get(t, base, "/api/v1/repos/"+key, "")
	var d api.RepoDetail
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("detail of %s: %d %v\n%s", key, code, err, body)
	}
	return d, code
}

// A repository's detail shows each of its replicas with its state, as the
// coordinator sends it: a replica it does not name holds the recorded
// state; one that has differed for longer than a pull takes is behind;
// one not confirmed is neither current nor behind.
func TestTheDetailShowsEachReplicaWithItsState(t *testing.T) {
	const key = "h.example/a/held"
	f := tierNode(t, 5, "", key, 5, 6, 7)
	now := f.clk.Now()
	old := strings.Repeat("0", 32)
	f.states([]*fleetv1.RepoState{{Key: key, Url: "https://" + key, Owner: 99, State: "ok", Digest: "d1", LastCheckMs: 1e12,
		Replicas: []uint32{5, 6, 7}, ReplicaStates: []*fleetv1.ReplicaState{
			{Node: 6, Confirmed: true, Digest: old, DiffersSinceMs: now.Add(-repostate.ReplicaBehindAfter).UnixMilli()},
			{Node: 7}}}})
	holdMirror(t, f, key)
	srv := httptest.NewServer(f.publicHandler())
	t.Cleanup(srv.Close)
	d, code := detailOf(t, srv.URL, key)
	want := []api.ReplicaState{{Node: 5, Confirmed: true, Current: true, Digest: "d1"},
		{Node: 6, Confirmed: true, Digest: old, Behind: true}, {Node: 7}}
	if code != http.StatusOK || len(d.ReplicaStates) != 3 {
		t.Fatalf("detail: %d, replica states %+v; want %+v", code, d.ReplicaStates, want)
	}
	for i, w := range want {
		g := d.ReplicaStates[i]
		g.DiffersSince = nil
		if g != w {
			t.Errorf("replica %d: %+v, want %+v", i, g, w)
		}
	}
	if at := d.ReplicaStates[1].DiffersSince; at == nil || !at.Equal(now.Add(-repostate.ReplicaBehindAfter)) {
		t.Errorf("the behind replica differs since %v, want %v", at, now.Add(-repostate.ReplicaBehindAfter))
	}
}

// On a full node that does not hold them, the repositories another
// replica holds are served, and current when that replica holds the
// recorded state, in lists and counters as in the detail: the tier's
// truth, not this node's disk. One whose replicas have not confirmed it,
// or differ, is not current; one not confirmed anywhere is not served.
func TestARepositoryHeldByAnotherReplicaIsServedAndCurrentInListsAndCounters(t *testing.T) {
	const current, late, unheld = "h.example/a/current", "h.example/a/late", "h.example/a/unheld"
	f := tierNode(t, 3, "", current, 5, 6)
	f.states([]*fleetv1.RepoState{
		{Key: late, Url: "https://" + late, Owner: 99, State: "ok", Digest: "d2", Replicas: []uint32{5, 6},
			ReplicaStates: []*fleetv1.ReplicaState{{Node: 5, Confirmed: true, Digest: "d1", DiffersSinceMs: 1e12}, {Node: 6}}},
		{Key: unheld, Url: "https://" + unheld, Owner: 99, State: "ok", Digest: "d1", Replicas: []uint32{5, 6},
			ReplicaStates: []*fleetv1.ReplicaState{{Node: 5}, {Node: 6}}}})
	f.reclass(current, late, unheld)
	repos, _ := f.backend.ListRepos(t.Context(), api.RepoFilter{Limit: 10})
	got := map[string][2]bool{}
	for _, r := range repos {
		got[r.Key] = [2]bool{r.Served, r.Current}
	}
	want := map[string][2]bool{current: {true, true}, late: {true, false}, unheld: {false, false}}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: served, current %v; want %v", k, got[k], w)
		}
	}
	if n := f.totals().current; n != 1 {
		t.Errorf("current by the counters: %d, want 1", n)
	}
}

// The cost of a repository's API detail (and its badge) relayed to its
// replica against the same call answered by the replica itself: both
// over HTTP on 127.0.0.1, the relay through the link between the two full
// nodes.
func BenchmarkAPIDetailRelayed(b *testing.B) {
	const key = "h.example/a/held"
	holder := tierNode(b, 5, "", key, 5)
	holdMirror(b, holder, key)
	direct := httptest.NewServer(holder.publicHandler())
	b.Cleanup(direct.Close)
	tr := newTier(b, tierNode(b, 3, "", key, 5), map[uint32]http.Handler{5: links(holder)})
	// The detail reads the refs with a git process; the badge, which
	// reads only the view, shows the relay's own cost.
	for _, c := range []struct{ name, base, path, want string }{
		{"detail/direct", direct.URL, "/api/v1/repos/" + key, "refs/heads/main"},
		{"detail/relayed", tr.base, "/api/v1/repos/" + key, "refs/heads/main"},
		{"badge/direct", direct.URL, "/-/badge/" + key + ".svg", "<svg"},
		{"badge/relayed", tr.base, "/-/badge/" + key + ".svg", "<svg"},
	} {
		b.Run(c.name, func(b *testing.B) {
			before := cpuTime(b)
			for b.Loop() {
				if code, body := get(b, c.base, c.path, ""); code != http.StatusOK || !strings.Contains(string(body), c.want) {
					b.Fatalf("%d\n%s", code, body)
				}
			}
			// The CPU of this process (both full nodes and the client) and
			// of its git processes: wall time on a busy machine says little.
			b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time of this process and its waited-for children.
func cpuTime(tb testing.TB) time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			tb.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}
