package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// cancelBackend is a fake backend that can stop checks.
type cancelBackend struct {
	*fakeBackend
	cancels chan startCall
	err     error
}

func (b cancelBackend) CancelFetch(_ context.Context, key, taskID string) error {
	b.cancels <- startCall{key, taskID}
	return b.err
}

func newCancelEnv(t *testing.T, cancelErr error, keys ...string) (*testEnv, cancelBackend) {
	t.Helper()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &testEnv{b: newFakeBackend(keys...), clk: clock.NewFake(epoch), logs: &syncBuffer{}}
	b := cancelBackend{fakeBackend: e.b, cancels: make(chan startCall, 10), err: cancelErr}
	e.b.onStart = func(_, id string) { e.tasks.Running(id) }
	e.tasks = NewTasks(e.clk, 100)
	e.events = NewBroker(16, 8, discard)
	fleet := e.b.fleet()
	fleet.Checks = b
	e.srv = New(Config{Token: testToken}, fleet, e.tasks, e.events, discard, e.clk)
	e.ts = httptest.NewServer(e.srv)
	t.Cleanup(func() { e.srv.Close(); e.ts.Close() })
	return e, b
}

func TestCancellingARunningCheckStopsItAndEndsTheTask(t *testing.T) {
	e, b := newCancelEnv(t, nil, "github.com/a/b")
	var first, second Task
	e.do(t, http.MethodPost, "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &first)
	e.b.nextStart(t)
	e.do(t, http.MethodPost, "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &second) // a follow-up
	if second.ID == first.ID || second.State != TaskQueued {
		t.Fatalf("follow-up %+v", second)
	}
	var list TaskList
	e.do(t, http.MethodGet, "/api/v1/tasks", nil).decode(t, &list)
	if len(list.Tasks) != 2 || list.Tasks[0].ID != second.ID || list.Tasks[1].State != TaskRunning {
		t.Fatalf("tasks %+v, want the follow-up, then the running one", list.Tasks)
	}

	wantError(t, e.do(t, http.MethodPost, "/api/v1/tasks/"+first.ID+"/cancel", nil), http.StatusUnauthorized, "")
	r := e.do(t, http.MethodPost, "/api/v1/tasks/"+first.ID+"/cancel", nil, auth)
	var got Task
	r.decode(t, &got)
	if r.status != http.StatusOK || got.State != TaskCancelled || !got.Final() || got.Error != cancelledText {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if c := <-b.cancels; c.key != "github.com/a/b" || c.id != first.ID {
		t.Errorf("CancelFetch(%q, %q)", c.key, c.id)
	}
	// The follow-up starts now, as after any end of the task it follows.
	if c := e.b.nextStart(t); c.id != second.ID {
		t.Errorf("started %s, want the follow-up %s", c.id, second.ID)
	}
	wantError(t, e.do(t, http.MethodPost, "/api/v1/tasks/"+first.ID+"/cancel", nil, auth), http.StatusConflict, "cancelled")
	var public Task
	e.do(t, http.MethodGet, "/api/v1/tasks/"+first.ID, nil).decode(t, &public)
	if public.State != TaskCancelled || public.Error != repostate.ClassCancelled.String() {
		t.Errorf("the public's view of the task: %+v", public)
	}
	e.do(t, http.MethodGet, "/api/v1/tasks", nil).decode(t, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].ID != second.ID {
		t.Errorf("tasks after the cancel: %+v", list.Tasks)
	}
}

func TestCancellingAQueuedCheckMeansItNeverStarts(t *testing.T) {
	e, _ := newCancelEnv(t, nil, "github.com/a/b")
	var first, second Task
	e.do(t, http.MethodPost, "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &first)
	e.b.nextStart(t)
	e.do(t, http.MethodPost, "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &second)
	if r := e.do(t, http.MethodPost, "/api/v1/tasks/"+second.ID+"/cancel", nil, auth); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	e.tasks.Finish(first.ID, TaskResult{})
	e.b.noStart(t)
	// A new request makes a new task, not the cancelled one.
	var third Task
	e.do(t, http.MethodPost, "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &third)
	if third.ID == second.ID || e.b.nextStart(t).id != third.ID {
		t.Errorf("a new request after a cancelled one: %+v", third)
	}
}

func TestACheckThatCannotBeReachedStaysRunning(t *testing.T) {
	e, _ := newCancelEnv(t, errors.New("the coordinator is out of reach"), "github.com/a/b")
	var first Task
	e.do(t, http.MethodPost, "/api/v1/repos/github.com/a/b/fetch", nil, auth).decode(t, &first)
	e.b.nextStart(t)
	wantError(t, e.do(t, http.MethodPost, "/api/v1/tasks/"+first.ID+"/cancel", nil, auth), http.StatusServiceUnavailable, "out of reach")
	if got, _ := e.tasks.Get(first.ID); got.State != TaskRunning {
		t.Errorf("state %s, want running", got.State)
	}
	wantError(t, e.do(t, http.MethodPost, "/api/v1/tasks/nope/cancel", nil, auth), http.StatusNotFound, "no such task")
}
