package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// fakeBackend is an in-memory fleet that records what the API asks: every
// part of a Fleet but the fetch log and the change hints (fleet).
type fakeBackend struct {
	mu       sync.Mutex
	repos    map[string]RepoDetail
	nodes    []Node
	nodesErr error
	addErr   error
	feeds    []FeedStatus
	added    []addCall
	removed  []string
	starts   chan startCall // every StartFetch, in order
	startErr error
	// onStart, when set, runs inside StartFetch (e.g. to report on the task).
	onStart func(key, id string)
	pending *PendingPurge // a held-back catalog change
	// catalogErr is why the catalog cannot be read, since catalogErrAt.
	catalogErr   string
	catalogErrAt *time.Time
	catalogURL   string // where the catalog is fetched from
}

// fleet is b as every part of a Fleet it can be.
func (b *fakeBackend) fleet() Fleet {
	return Fleet{Repos: b, Catalog: b, Checks: b, Nodes: b, Feeds: b}
}

func (b *fakeBackend) Feeds() []FeedStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.feeds
}

func (b *fakeBackend) Catalog(context.Context) (CatalogStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return CatalogStatus{Commit: "c0ffee", Repos: len(b.repos), Pending: b.pending, Error: b.catalogErr, ErrorAt: b.catalogErrAt,
		URL: b.catalogURL}, nil
}

func (b *fakeBackend) ConfirmPurge(context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		return "", ErrNothingPending
	}
	b.pending = nil
	return "applied", nil
}

type addCall struct {
	url   string
	attrs map[string]string
}

type startCall struct{ key, id string }

func newFakeBackend(keys ...string) *fakeBackend {
	b := &fakeBackend{repos: map[string]RepoDetail{}, starts: make(chan startCall, 1000)}
	for _, k := range keys {
		b.repos[k] = RepoDetail{Repo: Repo{Key: k, UpstreamURL: "https://" + k + ".git", State: repostate.OK}}
	}
	return b
}

func (b *fakeBackend) ListRepos(_ context.Context, f RepoFilter) ([]Repo, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var match []Repo
	for _, d := range b.repos {
		if (f.State == nil || d.State == *f.State) && (f.Owner == 0 || d.Owner == f.Owner) && strings.HasPrefix(d.Key, f.Prefix) &&
			(f.Network == "" || d.Network == f.Network) {
			match = append(match, d.Repo)
		}
	}
	sort.Slice(match, func(i, j int) bool { return match[i].Key < match[j].Key })
	total := len(match)
	match = match[min(f.Offset, total):]
	return match[:min(f.Limit, len(match))], total
}

func (b *fakeBackend) GetRepo(_ context.Context, k repokey.Key) (RepoDetail, bool) {
	key := k.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.repos[key]
	return d, ok
}

func (b *fakeBackend) AddRepo(_ context.Context, url string, attrs map[string]string, _ bool) (Repo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.added = append(b.added, addCall{url, attrs})
	if b.addErr != nil {
		return Repo{}, b.addErr
	}
	k, _, err := repokey.Normalize(url, repokey.Options{AllowPrivate: true})
	key := k.String()
	if err != nil {
		return Repo{}, err
	}
	r := Repo{Key: key, UpstreamURL: url, State: repostate.Pending}
	b.repos[key] = RepoDetail{Repo: r, Attrs: attrs}
	return r, nil
}

func (b *fakeBackend) RemoveRepo(_ context.Context, k repokey.Key) error {
	key := k.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.repos[key]; !ok {
		return fmt.Errorf("remove %s: %w", key, ErrNotFound)
	}
	delete(b.repos, key)
	b.removed = append(b.removed, key)
	return nil
}

func (b *fakeBackend) StartFetch(_ context.Context, k repokey.Key, id string) error {
	key := k.String()
	b.starts <- startCall{key, id}
	if b.onStart != nil {
		b.onStart(key, id)
	}
	return b.startErr
}

// CancelFetch has nothing to stop: its checks are never run (cancelBackend
// records cancellations).
func (b *fakeBackend) CancelFetch(context.Context, string, string) error { return nil }

func (b *fakeBackend) Nodes(context.Context) ([]Node, error) { return b.nodes, b.nodesErr }

func (b *fakeBackend) RevokeNode(_ context.Context, id uint32, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.nodes {
		if b.nodes[i].ID == id {
			b.nodes[i].State, b.nodes[i].RevokedReason = "revoked", reason
			return nil
		}
	}
	return fmt.Errorf("node %d: %w", id, ErrNotFound)
}

func (b *fakeBackend) Known(k repokey.Key) bool {
	key := k.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.repos[key]
	return ok
}

func (b *fakeBackend) addedCalls() []addCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]addCall(nil), b.added...)
}

// nextStart waits for the next StartFetch call.
func (b *fakeBackend) nextStart(t *testing.T) startCall {
	t.Helper()
	select {
	case c := <-b.starts:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("StartFetch was not called")
		return startCall{}
	}
}

// noStart checks that StartFetch is not called: once the server's
// goroutines are all parked (settle), none is about to call it.
func (b *fakeBackend) noStart(t *testing.T) {
	t.Helper()
	settle(t)
	select {
	case c := <-b.starts:
		t.Fatalf("unexpected StartFetch(%s, %s)", c.key, c.id)
	default:
	}
}

const testToken = "s3cret-token"

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testEnv is a Server with a fake backend and clock behind a real HTTP
// listener.
type testEnv struct {
	srv    *Server
	ts     *httptest.Server
	b      *fakeBackend
	tasks  *Tasks
	events *Broker
	clk    *clock.Fake
	logs   *syncBuffer
}

func newTestEnv(t *testing.T, cfg Config, b *fakeBackend) *testEnv {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	e := &testEnv{b: b, clk: clock.NewFake(epoch), logs: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), e.logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.tasks = NewTasks(e.clk, 100)
	e.events = NewBroker(16, 8, log)
	e.srv = New(cfg, b.fleet(), e.tasks, e.events, log, e.clk)
	e.ts = httptest.NewServer(e.srv)
	t.Cleanup(func() {
		e.srv.Close()
		e.ts.Close()
	})
	return e
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic map, failing if it is not JSON.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %q", err, r.body)
	}
	return m
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
}

// do sends a request; headers are "Name: value" strings.
func (e *testEnv) do(t *testing.T, method, path string, body []byte, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, data}
}

const auth = "Authorization: Bearer " + testToken

// wantError checks a refusal: the status, a JSON body with a message.
func wantError(t *testing.T, r response, status int, contains string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if got, want := r.header.Get("Retry-After") != "", status == http.StatusServiceUnavailable; got != want {
		t.Errorf("status %d with Retry-After %q", status, r.header.Get("Retry-After"))
	}
	msg, _ := r.json(t)["error"].(string)
	if msg == "" || !strings.Contains(msg, contains) {
		t.Errorf("error message %q, want one containing %q", msg, contains)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (logs).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// webhookData is the directory of real webhook payloads, shared by the
// project's checkouts.
var webhookData = filepath.Join("..", "..", "..", "shared", "data", "webhooks")

func readPayload(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(webhookData, name))
	if os.IsNotExist(err) {
		tb.Skipf("no webhook payloads at %s", webhookData)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// eventually polls cond, advancing the fake clock by step each time,
// until it holds (goroutines react to the clock asynchronously).
func eventually(t *testing.T, clk *clock.Fake, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // bounds a failure only
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		clk.Advance(step)
		time.Sleep(time.Millisecond)
	}
}

// errInvalidForTest is a validation error from the backend's side.
var errInvalidForTest = fmt.Errorf("%w: host is blocked by policy", repokey.ErrInvalid)
