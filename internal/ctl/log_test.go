package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
)

// logServer answers the fetch log and the task endpoints as a full node
// would, and records what it was asked.
type logServer struct {
	mu    sync.Mutex
	asked []string
}

func (s *logServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.asked = append(s.asked, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/api/v1/log":
		_ = json.NewEncoder(w).Encode(api.LogPage{Entries: []fetchlog.Entry{
			{ID: "b", Key: "github.com/a/b", At: at, Kind: "pull", Node: 1, From: 3, Result: "ok", Changed: true, DurationMs: 40,
				RefsChanged: 2, Refs: []string{"refs/heads/main", "refs/tags/v1"}},
			{ID: "a", Key: "github.com/a/b", At: at.Add(-time.Minute), Kind: "check", Node: 3, Result: "failed", Error: "upstream unreachable"},
		}, Next: "a"})
	case r.URL.Path == "/api/v1/tasks":
		_ = json.NewEncoder(w).Encode(api.TaskList{Tasks: []api.Task{{ID: "t1", Key: "github.com/a/b", State: api.TaskRunning, Created: at}}})
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/tasks/t1/cancel":
		_ = json.NewEncoder(w).Encode(api.Task{ID: "t1", Key: "github.com/a/b", State: api.TaskCancelled})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"no such task"}`))
	}
}

func runAgainst(t *testing.T, h http.Handler, args ...string) (int, string, string) {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	var out, errOut bytes.Buffer
	env := map[string]string{"GITFLEET_SERVER": ts.URL, "GITFLEET_TOKEN": token}
	code := Main(context.Background(), args, &out, &errOut, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func TestLogAsksForWhatItIsToldAndPrintsATable(t *testing.T) {
	s := &logServer{}
	code, out, errOut := runAgainst(t, s, "log", "https://github.com/a/b.git", "--failed", "--since", "2026-03-01T11:00:00Z", "--node", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	u, _ := url.Parse(strings.Fields(s.asked[0])[1])
	q := u.Query()
	if q.Get("key") != "github.com/a/b" || q.Get("state") != "failed" || q.Get("since") != "2026-03-01T11:00:00Z" || q.Get("node") != "3" {
		t.Errorf("asked %s", s.asked[0])
	}
	for _, want := range []string{"TIME", "2026-03-01 12:00:00  github.com/a/b  pull   1<3", "2 refs/heads/main,refs/tags/v1",
		"check  3     failed", "upstream unreachable", "more: --before a"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runAgainst(t, s, "log", "--since", "90m"); code != 0 {
		t.Errorf("--since 90m: exit %d", code)
	}
	if code, _, errOut := runAgainst(t, s, "log", "--since", "yesterday"); code != 2 || !strings.Contains(errOut, "--since") {
		t.Errorf("--since yesterday: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runAgainst(t, s, "repos", "--failed"); code != 2 || !strings.Contains(errOut, "not a flag") {
		t.Errorf("repos --failed: exit %d: %s", code, errOut)
	}
}

func TestTasksAndCancel(t *testing.T) {
	s := &logServer{}
	code, out, _ := runAgainst(t, s, "tasks")
	if code != 0 || !strings.Contains(out, "t1    github.com/a/b  running") {
		t.Errorf("tasks: exit %d:\n%s", code, out)
	}
	code, out, _ = runAgainst(t, s, "cancel", "t1")
	if code != 0 || out != "github.com/a/b: cancelled (task t1)\n" {
		t.Errorf("cancel: exit %d: %q", code, out)
	}
	if last := s.asked[len(s.asked)-1]; last != "POST /api/v1/tasks/t1/cancel Bearer "+token {
		t.Errorf("asked %q", last)
	}
	if code, _, errOut := runAgainst(t, s, "cancel", "nope"); code != 1 || !strings.Contains(errOut, "no such task") {
		t.Errorf("cancel of an unknown task: exit %d: %s", code, errOut)
	}
}
