package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// graphQLForge answers GitHub's GraphQL lookups of the feed,
// `rN: repository(owner: $oN, name: $nN) { pushedAt nameWithOwner }`, with
// the push times it is given.
type graphQLForge struct {
	mu     sync.Mutex
	pushed map[string]time.Time // "owner/name" -> last push
}

var graphQLAlias = regexp.MustCompile(`(r\d+): repository\(owner: \$(o\d+), name: \$(n\d+)\)`)

func (g *graphQLForge) push(path string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pushed[path] = at
}

func (g *graphQLForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query     string            `json:"query"`
		Variables map[string]string `json:"variables"`
	}
	if r.URL.Path != "/api/graphql" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	reset := time.Now().Add(time.Hour)
	data := map[string]any{"rateLimit": map[string]any{"cost": 1, "remaining": 4999, "limit": 5000,
		"resetAt": reset.UTC().Format(time.RFC3339)}}
	g.mu.Lock()
	for _, m := range graphQLAlias.FindAllStringSubmatch(req.Query, -1) {
		path := req.Variables[m[2]] + "/" + req.Variables[m[3]]
		if at, ok := g.pushed[path]; ok {
			data[m[1]] = map[string]any{"pushedAt": at.UTC().Format(time.RFC3339), "nameWithOwner": path}
		}
	}
	g.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4999")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// checksSent drains s and returns the CheckNow messages it sent for key.
func checksSent(s *session, key string) []*fleetv1.CheckNow {
	var out []*fleetv1.CheckNow
	for _, m := range s.next() {
		if ch := m.GetCheckNow(); ch != nil && ch.GetKey() == key {
			out = append(out, ch)
		}
	}
	return out
}

// tasksDone drains s and returns the TaskDone messages it sent, by task.
func tasksDone(s *session) map[string]*fleetv1.TaskDone {
	out := map[string]*fleetv1.TaskDone{}
	for _, m := range s.next() {
		if d := m.GetTaskDone(); d != nil {
			out[d.GetTaskId()] = d
		}
	}
	return out
}

// A push that a forge's feed sees is one check of the owner. The feed asks
// the owner, with the push time, and tells the full node, which asks for a
// check of its own on the webhook's path (FetchNow, as its backend does):
// that check is the feed's, and the owner's one result answers the full
// node's task, whether it comes before the full node asks or after. A
// later ask of the full node is a check of its own.
func TestAFeedsPushChecksTheOwnerOnce(t *testing.T) {
	gh := &graphQLForge{pushed: map[string]time.Time{}}
	srv := httptest.NewServer(gh)
	t.Cleanup(srv.Close)
	api, err := url.Parse(srv.URL + "/api")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1.7e9, 0))
	c, err := New(context.Background(), Config{DataDir: dir, Catalog: filepath.Join(dir, "no-catalog"), JoinToken: testJoin,
		FullToken: testFull, Feeds: FeedConfig{Forges: forge.Config{
			Forges: map[string]forge.Forge{"github.com": {Host: "github.com", Kind: forge.GitHub, API: api}},
			Tokens: map[string][]forge.Token{"github.com": {forge.NewToken("feed-token")}}}}},
		slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	full := mustRegister(t, c, &fleetv1.RegisterRequest{Mode: fleetv1.Mode_MODE_FULL, FullToken: testFull, Name: "full"})
	node := mustRegister(t, c, &fleetv1.RegisterRequest{JoinToken: testJoin, Name: "owner", Capacity: 1})
	const key = "github.com/o/r"
	if _, err := c.AddRepo(as(full), &fleetv1.AddRepoRequest{Url: "https://" + key}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	fs, ns := connect(c, full), connect(c, node)
	c.placing = true
	c.setMembers()
	c.decide()
	c.result(node.GetNodeId(), &fleetv1.CheckResult{Key: key, Ok: true, Cloned: true, CheckedAtMs: clk.Now().UnixMilli()})
	fs.next()
	ns.next()
	c.mu.Unlock()
	feeds := c.startFeeds()
	if len(feeds) != 1 {
		t.Fatalf("%d feeds, want github.com's", len(feeds))
	}
	feed := feeds[0]

	// push asks the feed about a push a second from now, and returns the
	// owner's checks for it, and the task the feed's check answers.
	push := func() ([]*fleetv1.CheckNow, string) {
		t.Helper()
		clk.Advance(time.Hour) // past the feed's spacing and its planner's interval
		gh.push("o/r", clk.Now().Add(-time.Second))
		if _, err := c.askFeed(context.Background(), feed, clk.Now()); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		checks := checksSent(ns, key)
		if len(checks) != 1 || checks[0].GetPushedAtUnix() != clk.Now().Add(-time.Second).Unix() {
			t.Fatalf("the feed's push asked the owner for %v; want one check with the push time", checks)
		}
		if hints := fs.hints; len(hints) != 1 || hints[0].GetKey() != key {
			t.Fatalf("the full node is told %v; want the push", hints)
		}
		fs.next()
		return checks, checks[0].GetTaskId()
	}
	answer := func(task string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.result(node.GetNodeId(), &fleetv1.CheckResult{Key: key, Ok: true, Fetched: true, Changed: true,
			CheckedAtMs: clk.Now().UnixMilli(), TaskIds: []string{task}})
	}
	// fetchNow is the full node's ask, as its backend's StartFetch makes
	// it; it returns the owner's checks it made.
	fetchNow := func(task string) []*fleetv1.CheckNow {
		t.Helper()
		resp, err := c.FetchNow(as(full), &fleetv1.FetchNowRequest{Key: key, TaskId: task})
		if err != nil || resp.GetOwner() != node.GetNodeId() {
			t.Fatalf("FetchNow: %v, %v; want it routed to the owner", resp, err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return checksSent(ns, key)
	}
	done := func(task string) *fleetv1.TaskDone {
		c.mu.Lock()
		defer c.mu.Unlock()
		return tasksDone(fs)[task]
	}

	// The full node asks before the owner answers.
	checks, feedTask := push()
	if more := fetchNow("full-1"); len(more) != 0 {
		t.Fatalf("the owner was asked %d times for one push (%v)", 1+len(more), append(checks, more...))
	}
	if d := done("full-1"); d != nil {
		t.Fatalf("the full node's task is done (%v) before the owner answered", d)
	}
	answer(feedTask)
	if d := done("full-1"); d == nil || !d.GetOk() || !d.GetChanged() {
		t.Fatalf("the owner's answer gave the full node's task %v; want it done, changed", d)
	}

	// The owner answers before the full node asks.
	checks, feedTask = push()
	answer(feedTask)
	if more := fetchNow("full-2"); len(more) != 0 {
		t.Fatalf("the owner was asked %d times for one push (%v)", 1+len(more), append(checks, more...))
	}
	if d := done("full-2"); d == nil || !d.GetOk() || !d.GetChanged() {
		t.Fatalf("the full node's task is %v; want it answered at once with the owner's check", d)
	}

	// The full node's next ask, of the operator say, is a check of its own.
	if more := fetchNow("operator"); len(more) != 1 || more[0].GetTaskId() != "operator" {
		t.Fatalf("a second ask of the full node made the checks %v; want one of its own", more)
	}
}

// The check queue of a session holds one check a key: a second ask merges
// into it (the newest push, every task), and a task cancelled before its
// check was sent is taken out of it.
func TestTheCheckQueueHoldsOneCheckAKey(t *testing.T) {
	s := newSession(nil, &nodeRecord{ID: 1}, func() {})
	t0 := time.Unix(1.7e9, 0)
	s.queueCheckPushed("h/a", "", t0)
	s.queueCheckPushed("h/a", "", t0.Add(time.Minute))
	s.queueCheckPushed("h/a", "", t0.Add(-time.Minute))
	s.queueCheck("h/b", "task-b")
	s.queueCheck("h/a", "task-a")
	s.queueCheck("h/a", "task-a") // the same task twice: once
	s.queueCheck("h/c", "task-c")
	s.queueCancel("h/c", "task-c") // never sent: nothing to send
	s.queueCancel("h/d", "task-d") // sent before: the node is told
	got := s.checksToSend()
	want := []*fleetv1.CheckNow{
		{Key: "h/a", PushedAtUnix: t0.Add(time.Minute).Unix(), TaskId: "task-a"},
		{Key: "h/b", TaskId: "task-b"},
		{Key: "h/d", TaskId: "task-d", Cancel: true},
	}
	if len(got) != len(want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	for i := range want {
		if got[i].GetKey() != want[i].GetKey() || got[i].GetPushedAtUnix() != want[i].GetPushedAtUnix() ||
			got[i].GetTaskId() != want[i].GetTaskId() || got[i].GetCancel() != want[i].GetCancel() {
			t.Fatalf("sent %v, want %v", got, want)
		}
	}
	if len(s.checks) != 0 || len(s.checkOrder) != 0 || len(s.checksToSend()) != 0 {
		t.Fatalf("the queue is not empty after sending: %v %v", s.checks, s.checkOrder)
	}
}
