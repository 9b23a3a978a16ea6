package api

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// TestRequestsCoalesce plays sequences of requests, starts and ends, and
// checks which task each request gets. A request names the task it
// expects: a new name means a new task, a known name means joining it.
func TestRequestsCoalesce(t *testing.T) {
	type step struct {
		op    string // "request", "running", "finish"
		key   string // request: the repository
		task  string // the task's name in this test
		after string // request of a new task: the task it must follow
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a request joins the queued task", []step{
			{op: "request", key: "a", task: "t1"},
			{op: "request", key: "a", task: "t1"},
		}},
		{"requests while a task runs share one follow-up", []step{
			{op: "request", key: "a", task: "t1"},
			{op: "running", task: "t1"},
			{op: "request", key: "a", task: "t2", after: "t1"},
			{op: "request", key: "a", task: "t2"},
			{op: "request", key: "a", task: "t2"},
		}},
		{"once the follow-up runs, a request makes the next one", []step{
			{op: "request", key: "a", task: "t1"},
			{op: "running", task: "t1"},
			{op: "request", key: "a", task: "t2", after: "t1"},
			{op: "finish", task: "t1"},
			{op: "request", key: "a", task: "t2"},
			{op: "running", task: "t2"},
			{op: "request", key: "a", task: "t3", after: "t2"},
		}},
		{"after the end, a request makes a fresh task", []step{
			{op: "request", key: "a", task: "t1"},
			{op: "running", task: "t1"},
			{op: "finish", task: "t1"},
			{op: "request", key: "a", task: "t2"},
		}},
		{"a task finished before it ran is not joined", []step{
			{op: "request", key: "a", task: "t1"},
			{op: "finish", task: "t1"},
			{op: "request", key: "a", task: "t2"},
		}},
		{"repositories do not share tasks", []step{
			{op: "request", key: "a", task: "t1"},
			{op: "request", key: "b", task: "t2"},
			{op: "running", task: "t1"},
			{op: "request", key: "b", task: "t2"},
			{op: "request", key: "a", task: "t3", after: "t1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := NewTasks(clock.NewFake(epoch), 10)
			ids := map[string]string{}
			for i, s := range tt.steps {
				switch s.op {
				case "request":
					got, isNew := ts.Request(s.key)
					id, known := ids[s.task]
					if known {
						if isNew || got.ID != id {
							t.Fatalf("step %d: got task %s (new %v), want to join %s", i, got.ID, isNew, s.task)
						}
						continue
					}
					if !isNew || got.State != TaskQueued || got.Key != s.key {
						t.Fatalf("step %d: got %+v (new %v), want a new queued task for %s", i, got, isNew, s.key)
					}
					if got.after != ids[s.after] {
						t.Fatalf("step %d: %s follows %q, want %q (%s)", i, s.task, got.after, ids[s.after], s.after)
					}
					ids[s.task] = got.ID
				case "running":
					ts.Running(ids[s.task])
				case "finish":
					ts.Finish(ids[s.task], TaskResult{})
				}
			}
		})
	}
}

func TestFinishRecordsTheResult(t *testing.T) {
	tests := []struct {
		name      string
		result    TaskResult
		wantState TaskState
	}{
		{"done", TaskResult{OldRefs: map[string]string{"refs/heads/main": "a"}, NewRefs: map[string]string{"refs/heads/main": "b"}}, TaskDone},
		{"failed", TaskResult{Err: "upstream unreachable"}, TaskFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			ts := NewTasks(clk, 10)
			task, _ := ts.Request("a")
			clk.Advance(time.Second)
			ts.Running(task.ID)
			clk.Advance(500 * time.Millisecond)
			ts.Finish(task.ID, tt.result)
			ts.Finish(task.ID, TaskResult{Err: "a late second report"}) // ignored
			got, _ := ts.Get(task.ID)
			if got.State != tt.wantState || got.Error != tt.result.Err || got.NewRefs["refs/heads/main"] != tt.result.NewRefs["refs/heads/main"] {
				t.Errorf("task %+v", got)
			}
			if !got.Created.Equal(epoch) || !got.Started.Equal(epoch.Add(time.Second)) || !got.Finished.Equal(epoch.Add(1500*time.Millisecond)) || got.DurationMs != 1500 {
				t.Errorf("times: created %v started %v finished %v duration %dms", got.Created, got.Started, got.Finished, got.DurationMs)
			}
		})
	}
}

func TestWaitReturnsWhenTheTaskEnds(t *testing.T) {
	ts := NewTasks(clock.NewFake(epoch), 10)
	task, _ := ts.Request("a")
	done := make(chan Task)
	go func() {
		got, _ := ts.Wait(context.Background(), task.ID)
		done <- got
	}()
	ts.Running(task.ID)
	settle(t) // Wait waits for the task, or has returned
	select {
	case got := <-done:
		t.Fatalf("Wait returned before the end: %+v", got)
	default:
	}
	ts.Finish(task.ID, TaskResult{})
	if got := <-done; got.State != TaskDone {
		t.Errorf("state %s", got.State)
	}
}

func TestWaitStopsWithItsContextAndGivesTheLatestState(t *testing.T) {
	ts := NewTasks(clock.NewFake(epoch), 10)
	task, _ := ts.Request("a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	var got Task
	go func() {
		var err error
		got, err = ts.Wait(ctx, task.ID)
		done <- err
	}()
	ts.Running(task.ID)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || got.State != TaskRunning {
		t.Errorf("err %v, task %+v", err, got)
	}
}

func TestWaitForAnUnknownTask(t *testing.T) {
	if _, err := NewTasks(clock.NewFake(epoch), 10).Wait(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("err %v, want ErrNotFound", err)
	}
}

func TestATaskWithoutNewsFails(t *testing.T) {
	clk := clock.NewFake(epoch)
	ts := NewTasks(clk, 10)
	task, _ := ts.Request("a")
	ts.Running(task.ID)
	done := make(chan Task)
	go func() {
		got, _ := ts.Wait(context.Background(), task.ID)
		done <- got
	}()
	var got Task
	eventually(t, clk, time.Minute, func() bool {
		select {
		case got = <-done:
			return true
		default:
			return false
		}
	})
	if got.State != TaskFailed || got.Error == "" {
		t.Errorf("task %+v", got)
	}
	if d := got.Finished.Sub(got.Started); d < TaskTimeout {
		t.Errorf("expired after %v, want %v", d, TaskTimeout)
	}
	// A new request does not follow the expired task.
	if next, isNew := ts.Request("a"); !isNew || next.after != "" {
		t.Errorf("next task %+v (new %v)", next, isNew)
	}
}

func TestAFollowUpDoesNotExpireBeforeItsPredecessor(t *testing.T) {
	clk := clock.NewFake(epoch)
	ts := NewTasks(clk, 10)
	first, _ := ts.Request("a")
	ts.Running(first.ID)
	clk.Advance(TaskTimeout / 2)
	second, _ := ts.Request("a")

	clk.Advance(TaskTimeout/2 - time.Second)
	if got, _ := ts.Get(first.ID); got.State != TaskRunning {
		t.Fatalf("first expired early: %+v", got)
	}
	clk.Advance(time.Second)
	if got, _ := ts.Get(second.ID); got.State != TaskQueued {
		t.Fatalf("second, when the first expires: %+v", got)
	}
	if got, _ := ts.Get(first.ID); got.State != TaskFailed {
		t.Fatalf("first, at its timeout: %+v", got)
	}
	clk.Advance(TaskTimeout - time.Second)
	if got, _ := ts.Get(second.ID); got.State != TaskQueued {
		t.Fatalf("second expired before its own timeout: %+v", got)
	}
	clk.Advance(time.Second)
	if got, _ := ts.Get(second.ID); got.State != TaskFailed {
		t.Fatalf("second, at its timeout: %+v", got)
	}
}

func TestOnlyTheLastFinishedTasksAreKept(t *testing.T) {
	ts := NewTasks(clock.NewFake(epoch), 3)
	var ids []string
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		task, _ := ts.Request(key)
		ts.Finish(task.ID, TaskResult{})
		ids = append(ids, task.ID)
	}
	for i, id := range ids {
		if _, ok := ts.Get(id); ok != (i >= 2) {
			t.Errorf("task %d kept: %v", i, ok)
		}
	}
}

func TestTaskIDsAreUnguessableAndURLSafe(t *testing.T) {
	ts := NewTasks(clock.NewFake(epoch), 10)
	urlSafe := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	seen := map[string]bool{}
	for range 1000 {
		task, _ := ts.Request("a")
		ts.Finish(task.ID, TaskResult{})
		if !urlSafe.MatchString(task.ID) || seen[task.ID] {
			t.Fatalf("ID %q: not 128 URL-safe random bits, or seen before", task.ID)
		}
		seen[task.ID] = true
	}
}
