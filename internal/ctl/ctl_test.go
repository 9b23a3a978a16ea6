package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/testnet"
)

const token = "ctl-token"

var at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// backend is a small in-memory fleet for the API (api.Fleet).
type backend struct {
	mu      sync.Mutex
	repos   map[string]api.RepoDetail
	filter  api.RepoFilter
	added   map[string]string
	nodes   []api.Node
	onStart func(key, id string)
	held    *api.PendingPurge
	// catalog is the catalog's status but the held change (default: a
	// commit of 3 repositories).
	catalog *api.CatalogStatus
}

func (b *backend) ListRepos(_ context.Context, f api.RepoFilter) ([]api.Repo, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.filter = f
	var out []api.Repo
	for _, d := range b.repos {
		out = append(out, d.Repo)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out[:min(f.Limit, len(out))], len(out)
}

func (b *backend) GetRepo(_ context.Context, k repokey.Key) (api.RepoDetail, bool) {
	key := k.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.repos[key]
	return d, ok
}

func (b *backend) AddRepo(_ context.Context, url string, attrs map[string]string, _ bool) (api.Repo, error) {
	nk, _, err := repokey.Normalize(url, repokey.Options{})
	if err != nil {
		return api.Repo{}, err
	}
	key := nk.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.added = attrs
	r := api.Repo{Key: key, UpstreamURL: url}
	b.repos[key] = api.RepoDetail{Repo: r}
	return r, nil
}

func (b *backend) RemoveRepo(_ context.Context, k repokey.Key) error {
	key := k.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.repos[key]; !ok {
		return api.ErrNotFound
	}
	delete(b.repos, key)
	return nil
}

func (b *backend) StartFetch(_ context.Context, k repokey.Key, id string) error {
	key := k.String()
	if b.onStart != nil {
		b.onStart(key, id)
	}
	return nil
}

// CancelFetch has nothing to stop: its checks are never run.
func (b *backend) CancelFetch(context.Context, string, string) error { return nil }

func (b *backend) Nodes(context.Context) ([]api.Node, error) { return b.nodes, nil }

func (b *backend) RevokeNode(_ context.Context, id uint32, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.nodes {
		if b.nodes[i].ID == id {
			b.nodes[i].State, b.nodes[i].RevokedReason, b.nodes[i].RevokedAt = "revoked", reason, at
			return nil
		}
	}
	return api.ErrNotFound
}

func (b *backend) Catalog(context.Context) (api.CatalogStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := api.CatalogStatus{Commit: "c0ffee", Repos: 3}
	if b.catalog != nil {
		st = *b.catalog
	}
	st.Pending = b.held
	return st, nil
}

func (b *backend) ConfirmPurge(context.Context) (string, error) { return "", api.ErrNothingPending }

func (b *backend) Known(k repokey.Key) bool {
	_, ok := b.GetRepo(context.Background(), k)
	return ok
}

type fixture struct {
	b      *backend
	tasks  *api.Tasks
	events *api.Broker
	url    string
	// streams is signalled when an event stream has been opened.
	streams chan struct{}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	check := at.Add(-90 * time.Second)
	b := &backend{repos: map[string]api.RepoDetail{
		"github.com/a/b": {
			Repo: api.Repo{Key: "github.com/a/b", UpstreamURL: "https://github.com/a/b.git", Owner: 2, State: repostate.OK,
				Served: true, Current: true, LastCheck: &check, VerifiedAt: &check, StalenessSeconds: 90, Replicas: []uint32{3, 1}},
			Attrs:   map[string]string{"team": "kernel"},
			Refs:    map[string]string{"refs/heads/main": strings.Repeat("1", 40)},
			History: []api.HistoryEntry{{At: check, Kind: "check", Changed: true, DurationMs: 120}},
		},
		"gitlab.com/c/d": {Repo: api.Repo{Key: "gitlab.com/c/d", Owner: 1, State: repostate.Failing, LastError: "upstream: not found"}},
	}}
	log := slog.New(slog.DiscardHandler)
	f := &fixture{b: b, tasks: api.NewTasks(clock.Real{}, 100), events: api.NewBroker(0, 0, log), streams: make(chan struct{}, 10)}
	srv := api.New(api.Config{Token: token, PublicURL: "http://mirror"}, api.Fleet{Repos: b, Catalog: b, Checks: b, Nodes: b}, f.tasks, f.events, log, clock.Real{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events" {
			w = &openSignal{ResponseWriter: w, opened: f.streams}
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	f.url = ts.URL
	return f
}

// openSignal signals its first write: the stream is subscribed.
type openSignal struct {
	http.ResponseWriter
	opened chan struct{}
	once   sync.Once
}

func (o *openSignal) Write(p []byte) (int, error) {
	n, err := o.ResponseWriter.Write(p)
	o.once.Do(func() { o.opened <- struct{}{} })
	return n, err
}

func (o *openSignal) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// run runs ctl against the fixture with the token in the environment.
func (f *fixture) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, &out, &errOut, f.env(token))
	return code, out.String(), errOut.String()
}

func (f *fixture) env(tok string) func(string) string {
	return func(k string) string {
		return map[string]string{"GITFLEET_SERVER": f.url, "GITFLEET_TOKEN": tok}[k]
	}
}

func TestReposPrintsATable(t *testing.T) {
	f := newFixture(t)
	code, out, errOut := f.run(t, "repos")
	want := `KEY             STATE    OWNER  SERVED   LAST CHECK           VERIFIED             STALENESS  LAST ERROR
github.com/a/b  ok       2      current  2026-03-01 11:58:30  2026-03-01 11:58:30  1m30s      
gitlab.com/c/d  failing  1      no       -                    -                    -          upstream: not found
`
	if code != 0 || out != want {
		t.Errorf("exit %d, stderr %q, output:\n%s\nwant:\n%s", code, errOut, out, want)
	}
}

func TestReposPassesFiltersAndSaysWhenThereIsMore(t *testing.T) {
	f := newFixture(t)
	code, out, _ := f.run(t, "repos", "--prefix", "git", "--owner", "2", "--state", "ok", "--network", "root:0123456789abcdef0123456789abcdef01234567",
		"--limit", "1", "--offset", "0")
	if code != 0 || !strings.HasSuffix(out, "1 to 1 of 2 (--offset and --limit for more)\n") {
		t.Errorf("exit %d output %q", code, out)
	}
	if got := f.b.filter; got.Prefix != "git" || got.Owner != 2 || got.State == nil || *got.State != repostate.OK || got.Limit != 1 ||
		got.Network != "root:0123456789abcdef0123456789abcdef01234567" {
		t.Errorf("filter %+v", got)
	}
}

func TestJSONIsTheServersJSON(t *testing.T) {
	f := newFixture(t)
	for _, args := range [][]string{{"repos"}, {"show", "github.com/a/b"}, {"nodes"}} {
		code, out, _ := f.run(t, append([]string{"--json"}, args...)...)
		req, _ := http.NewRequest(http.MethodGet, f.url+map[string]string{"repos": "/api/v1/repos", "show": "/api/v1/repos/github.com/a/b", "nodes": "/api/v1/nodes"}[args[0]], nil)
		req.Header.Set("Authorization", "Bearer "+token) // as ctl sends it: the operator's view
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		direct, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if code != 0 || out != string(direct) {
			t.Errorf("%v: exit %d, output\n%s\nwant\n%s", args, code, out, direct)
		}
	}
}

func TestShowPrintsTheDetail(t *testing.T) {
	f := newFixture(t)
	code, out, _ := f.run(t, "show", "https://github.com/a/b.git") // a URL works as well as a key
	want := `key         github.com/a/b
upstream    https://github.com/a/b.git
clone       http://mirror/github.com/a/b.git
owner       2
replicas    3, 1
state       ok
served      current
last check  2026-03-01 11:58:30
verified    2026-03-01 11:58:30
staleness   1m30s
attributes:
  team  kernel
refs:
  refs/heads/main  1111111111111111111111111111111111111111
history:
  2026-03-01 11:58:30  check, changed (120ms)
`
	if code != 0 || out != want {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s", code, out, want)
	}
}

func TestAddWithAttributes(t *testing.T) {
	f := newFixture(t)
	code, out, errOut := f.run(t, "add", "https://github.com/x/y.git", "team=infra", "prio=high")
	if code != 0 || out != "added github.com/x/y\nclone URL: http://mirror/github.com/x/y.git\n" {
		t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	if f.b.added["team"] != "infra" || f.b.added["prio"] != "high" {
		t.Errorf("attributes %v", f.b.added)
	}
	if code, out, _ = f.run(t, "add", "https://github.com/x/y.git"); code != 0 || !strings.HasPrefix(out, "updated github.com/x/y") {
		t.Errorf("second add: exit %d output %q", code, out)
	}
}

func TestServerRefusalsExitWithTheirMessage(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name  string
		token string
		args  []string
		msg   string
	}{
		{"no token", "", []string{"add", "https://github.com/x/y"}, "this request needs an API token: Authorization: Bearer <token> (give the API token with --token, GITFLEET_TOKEN or the config file) (HTTP 401)"},
		{"wrong token", "nope", []string{"rm", "github.com/a/b"}, "wrong API token"},
		{"bad URL", token, []string{"add", "ftp://github.com/x/y"}, `scheme "ftp" is not allowed`},
		{"unknown repository", token, []string{"show", "github.com/no/such"}, "repository github.com/no/such is not mirrored (HTTP 404)"},
		{"unknown state", token, []string{"repos", "--state", "bogus"}, `state "bogus": want one of ok, pending, failing, gone, deleted, legal, disabled, archived, renamed, too-large, too-many-refs, unplaceable, corrupt, repairing, unchecked (HTTP 400)`},
		{"bad network", token, []string{"repos", "--network", "linux trees"}, `network name "linux trees" has ' '; use letters, digits, '.', '_' and '-' (HTTP 400)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(context.Background(), tt.args, &out, &errOut, f.env(tt.token))
			if code != 1 || !strings.Contains(errOut.String(), tt.msg) {
				t.Errorf("exit %d, stderr %q, want 1 and %q", code, errOut.String(), tt.msg)
			}
		})
	}
}

func TestAnUnreachableServerIsAClearError(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"--server", "127.0.0.1:1", "repos"}, &out, &errOut, func(string) string { return "" })
	if code != 1 || !strings.Contains(errOut.String(), "cannot reach the server") {
		t.Errorf("exit %d stderr %q", code, errOut.String())
	}
}

func TestRm(t *testing.T) {
	f := newFixture(t)
	if code, out, _ := f.run(t, "rm", "github.com/a/b"); code != 0 || out != "removed github.com/a/b\n" {
		t.Errorf("exit %d output %q", code, out)
	}
	if f.b.Known("github.com/a/b") {
		t.Error("still there")
	}
}

// lineWriter collects output and signals each line that contains want.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	hit  chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.want != "" && bytes.Contains(p, []byte(w.want)) {
		w.hit <- struct{}{}
	}
	return w.buf.Write(p)
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestFetchWaitShowsProgressAndTheChangedRefs(t *testing.T) {
	f := newFixture(t)
	started := make(chan string, 1)
	f.b.onStart = func(_, id string) {
		f.tasks.Running(id)
		started <- id
	}
	out := &lineWriter{want: ": running", hit: make(chan struct{}, 1)}
	done := make(chan int)
	go func() {
		done <- Main(context.Background(), []string{"fetch", "github.com/a/b", "--wait"}, out, io.Discard, f.env(token))
	}()
	id := <-started
	<-out.hit // progress was shown before the end
	f.tasks.Finish(id, api.TaskResult{
		OldRefs: map[string]string{"refs/heads/main": strings.Repeat("1", 40), "refs/heads/old": strings.Repeat("9", 40)},
		NewRefs: map[string]string{"refs/heads/main": strings.Repeat("2", 40), "refs/tags/v2": strings.Repeat("3", 40)},
	})
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
	lines := strings.Split(out.String(), "\n")
	want := []string{
		"github.com/a/b: queued (task " + id + ")",
		"github.com/a/b: running",
		"github.com/a/b: done in ", // + the duration
		"  refs/heads/main  1111111111..2222222222",
		"  refs/heads/old   deleted (was 9999999999)",
		"  refs/tags/v2     new 3333333333",
		"",
	}
	if len(lines) != len(want) {
		t.Fatalf("output:\n%s", out)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d: %q, want %q", i, lines[i], want[i])
		}
	}
	if !strings.HasSuffix(lines[2], ", 3 refs changed") {
		t.Errorf("summary %q", lines[2])
	}
}

func TestFetchWaitFailsWhenTheCheckFails(t *testing.T) {
	for _, jsonOut := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonOut), func(t *testing.T) {
			f := newFixture(t)
			f.b.onStart = func(_, id string) { f.tasks.Finish(id, api.TaskResult{Err: "upstream: connection refused"}) }
			args := []string{"fetch", "--wait", "github.com/a/b"}
			if jsonOut {
				args = append(args, "--json")
			}
			code, out, errOut := f.run(t, args...)
			if code != 1 || !strings.Contains(errOut, "the check of github.com/a/b failed: upstream: connection refused") {
				t.Errorf("exit %d stderr %q", code, errOut)
			}
			if jsonOut {
				var task api.Task
				if err := json.Unmarshal([]byte(out), &task); err != nil || task.State != api.TaskFailed {
					t.Errorf("stdout %q: %v", out, err)
				}
			}
		})
	}
}

func TestFetchWithoutWaitPrintsTheTask(t *testing.T) {
	f := newFixture(t)
	code, out, _ := f.run(t, "fetch", "github.com/a/b")
	if code != 0 || !strings.HasPrefix(out, "github.com/a/b: queued (task ") {
		t.Errorf("exit %d output %q", code, out)
	}
}

func TestNodesPrintsATable(t *testing.T) {
	f := newFixture(t)
	f.b.nodes = []api.Node{
		{ID: 1, Name: "full-1", Mode: "full", State: "alive", LastHeartbeat: at, Repos: 10, DiskUsed: 3 << 30, DiskTotal: 100 << 30},
		{ID: 2, Name: "lab", Mode: "partial", State: "suspect", Flapping: true, History: []api.Transition{{From: "alive", To: "suspect", At: at}},
			StaleReports: 2},
	}
	code, out, _ := f.run(t, "nodes")
	want := `ID  NAME    MODE     STATE    LAST HEARTBEAT       REPOS  DISK                 FLAPPING         STALE REPORTS
1   full-1  full     alive    2026-03-01 12:00:00  10     3.0 GiB / 100.0 GiB  no               0
2   lab     partial  suspect  -                    0      -                    yes (1 changes)  2
`
	if code != 0 || out != want {
		t.Errorf("exit %d output:\n%s\nwant:\n%s", code, out, want)
	}
}

func TestEventsStreamsOneLinePerEvent(t *testing.T) {
	zero := api.ZeroID
	evs := []api.Event{
		{Key: "github.com/a/b", Ref: "refs/heads/main", Old: strings.Repeat("1", 40), New: strings.Repeat("2", 40), Time: at},
		{Key: "github.com/a/b", Ref: "refs/tags/v1", Old: zero, New: strings.Repeat("3", 40), Time: at},
		{Key: "github.com/a/b", Ref: "refs/heads/gone", Old: strings.Repeat("4", 40), New: zero, Time: at},
	}
	tests := []struct {
		json bool
		want []string
	}{
		{false, []string{
			"2026-03-01T12:00:00Z  github.com/a/b  refs/heads/main  1111111111..2222222222",
			"2026-03-01T12:00:00Z  github.com/a/b  refs/tags/v1  new 3333333333",
			"2026-03-01T12:00:00Z  github.com/a/b  refs/heads/gone  deleted (was 4444444444)",
		}},
		{true, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("json=%v", tt.json), func(t *testing.T) {
			f := newFixture(t)
			ctx, cancel := context.WithCancel(context.Background())
			out := &lineWriter{want: "\n", hit: make(chan struct{}, 10)}
			args := []string{"events"}
			if tt.json {
				args = append(args, "--json")
			}
			done := make(chan int)
			go func() { done <- Main(ctx, args, out, io.Discard, f.env("")) }()
			<-f.streams
			f.events.Publish(evs[:2]...)
			f.events.Publish(evs[2])
			for range evs {
				<-out.hit
			}
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("exit %d", code)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != len(evs) {
				t.Fatalf("output:\n%s", out)
			}
			for i, l := range lines {
				if !tt.json {
					if l != tt.want[i] {
						t.Errorf("line %d: %q, want %q", i, l, tt.want[i])
					}
					continue
				}
				var ev api.Event
				if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.ID != uint64(i+1) || ev.Ref != evs[i].Ref {
					t.Errorf("line %d: %q (%v)", i, l, err)
				}
			}
		})
	}
}

func TestEventsReconnectAndResume(t *testing.T) {
	// A server that ends the first stream after one event, then serves
	// the rest to a client that resumes after it.
	var mu sync.Mutex
	var lastIDs []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		n := len(lastIDs)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			fmt.Fprintf(w, "id: 7\ndata: {\"id\":7,\"key\":\"k/a\",\"ref\":\"refs/heads/a\",\"old\":\"%s\",\"new\":\"%s\"}\n\n", api.ZeroID, strings.Repeat("1", 40))
			return
		}
		fmt.Fprintf(w, ": hi\n\nid: 8\ndata: {\"id\":8,\"key\":\"k/a\",\"ref\":\"refs/heads/b\",\"old\":\"%s\",\"new\":\"%s\"}\n\n", api.ZeroID, strings.Repeat("2", 40))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lineWriter{want: "\n", hit: make(chan struct{}, 10)}
	var errOut bytes.Buffer
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"--server", ts.URL, "--json", "events"}, out, &errOut, func(string) string { return "" })
	}()
	<-out.hit
	<-out.hit
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(lastIDs) != 2 || lastIDs[0] != "" || lastIDs[1] != "7" {
		t.Errorf("Last-Event-ID of each connection: %q, want [\"\" \"7\"]", lastIDs)
	}
	if !strings.Contains(errOut.String(), "reconnecting") || strings.Count(out.String(), "\n") != 2 {
		t.Errorf("stdout %q stderr %q", out, errOut.String())
	}
}

func TestServerAndTokenComeFromFlagsThenEnvironmentThenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("xdg/gitfleet/ctl.yaml", "server: http://xdg:1\ntoken: xdg-token\n")
	write("home/.config/gitfleet/ctl.yaml", "server: http://home:1\n")
	explicit := write("explicit.yaml", "server: http://explicit:1\ntoken: explicit-token\n")
	typo := write("typo.yaml", "sever: http://x:1\n")

	tests := []struct {
		name                  string
		flags                 options
		env                   map[string]string
		wantServer, wantToken string
		wantErr               string
	}{
		{"defaults", options{}, nil, defaultServer, "", ""},
		{"XDG config file", options{}, map[string]string{"XDG_CONFIG_HOME": dir + "/xdg", "HOME": dir + "/home"}, "http://xdg:1", "xdg-token", ""},
		{"home config file", options{}, map[string]string{"HOME": dir + "/home"}, "http://home:1", "", ""},
		{"explicit config file", options{config: explicit}, map[string]string{"HOME": dir + "/home"}, "http://explicit:1", "explicit-token", ""},
		{"environment over file", options{}, map[string]string{"XDG_CONFIG_HOME": dir + "/xdg", "GITFLEET_SERVER": "http://env:1", "GITFLEET_TOKEN": "env-token"}, "http://env:1", "env-token", ""},
		{"flags over environment", options{server: "http://flag:1", token: "flag-token"}, map[string]string{"GITFLEET_SERVER": "http://env:1", "GITFLEET_TOKEN": "env-token"}, "http://flag:1", "flag-token", ""},
		{"missing explicit file", options{config: dir + "/nope.yaml"}, nil, "", "", "no such file"},
		{"unknown key in the file", options{config: typo}, nil, "", "", "field sever not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.flags
			err := resolve(&o, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || o.server != tt.wantServer || o.token != tt.wantToken {
				t.Errorf("server %q token %q err %v, want %q %q", o.server, o.token, err, tt.wantServer, tt.wantToken)
			}
		})
	}
}

func TestBadCommandLines(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "no command"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"show"}, 2, "show takes a repository key or URL"},
		{[]string{"show", "a/b", "c/d"}, 2, "show takes"},
		{[]string{"repos", "--wait"}, 2, `--wait: not a flag of "repos"`},
		{[]string{"fetch", "a/b", "--prefix", "x"}, 2, `--prefix: not a flag of "fetch"`},
		{[]string{"add", "https://github.com/a/b", "team"}, 2, `attribute "team": want name=value`},
		{[]string{"add"}, 2, "add takes a URL"},
		{[]string{"--bogus", "repos"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"-h"}, 0, "usage: gitfleet ctl"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(context.Background(), tt.args, &out, &errOut, func(string) string { return "" })
			if code != tt.code || !strings.Contains(errOut.String(), tt.msg) {
				t.Errorf("exit %d, stderr %q, want %d and %q", code, errOut.String(), tt.code, tt.msg)
			}
		})
	}
}

func TestFlagsMayFollowTheCommand(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	wait := fs.Bool("wait", false, "")
	pos, err := parseInterleaved(fs, []string{"fetch", "a/b", "--wait", "--", "--not-a-flag"})
	if err != nil || !*wait || strings.Join(pos, " ") != "fetch a/b --not-a-flag" {
		t.Errorf("positional %q, wait %v, err %v", pos, *wait, err)
	}
}

// Commands is the list gitfleet's usage shows: each is in ctl's usage and
// is run, and ctl's usage has no command that is not in it.
func TestCommandsListsEveryCommand(t *testing.T) {
	described := map[string]bool{}
	_, list, _ := strings.Cut(usage, "commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
			described[strings.Fields(line)[0]] = true
		}
	}
	for _, cmd := range Commands() {
		if !described[cmd] {
			t.Errorf("%s is not in ctl's usage", cmd)
		}
		delete(described, cmd)
		err := run(context.Background(), []string{"--server", "http://" + testnet.Addr(t), cmd}, io.Discard, io.Discard, func(string) string { return "" })
		if err == nil || strings.Contains(err.Error(), "unknown command") {
			t.Errorf("ctl %s: %v", cmd, err)
		}
	}
	for cmd := range described {
		t.Errorf("ctl's usage describes %s, which Commands does not list", cmd)
	}
}

// A full node that has just started answers writes 503 with Retry-After
// until its session with the coordinator is up: ctl waits that out, within
// a bound, and takes any other answer as final.
func TestAWriteWaitsOutAServerThatSaysWhenToComeBack(t *testing.T) {
	f := newFixture(t)
	target, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	for _, tt := range []struct {
		name       string
		retryAfter string
		unready    int // 503s before the server is ready
		wantCode   int
		wantPosts  int
	}{
		{"ready after two 503s", "1", 2, 0, 3},
		{"a 503 without Retry-After is final", "", 5, 1, 1},
		{"a Retry-After past the bound is final", "31", 5, 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			posts := 0
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				posts++
				n := posts
				mu.Unlock()
				if n <= tt.unready {
					if tt.retryAfter != "" {
						w.Header().Set("Retry-After", tt.retryAfter)
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusServiceUnavailable)
					fmt.Fprint(w, `{"error":"the full node is not connected to its coordinator yet"}`)
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			defer ts.Close()
			var out, errOut bytes.Buffer
			env := func(k string) string {
				return map[string]string{"GITFLEET_SERVER": ts.URL, "GITFLEET_TOKEN": token}[k]
			}
			code := Main(context.Background(), []string{"add", "https://github.com/new/repo"}, &out, &errOut, env)
			mu.Lock()
			defer mu.Unlock()
			if code != tt.wantCode || posts != tt.wantPosts {
				t.Fatalf("exit %d after %d requests, want %d after %d\nstdout %s\nstderr %s", code, posts, tt.wantCode, tt.wantPosts, out.String(), errOut.String())
			}
			if tt.wantCode != 0 && !strings.Contains(errOut.String(), "not connected to its coordinator yet (HTTP 503)") {
				t.Errorf("stderr %q: want the server's message", errOut.String())
			}
		})
	}
}
