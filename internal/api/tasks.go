package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// TaskState is the state of an on-demand check.
type TaskState string

// The states of a task: queued, then running, then done, failed or
// cancelled (by the operator, see cancel.go).
const (
	TaskQueued    TaskState = "queued"
	TaskRunning   TaskState = "running"
	TaskDone      TaskState = "done"
	TaskFailed    TaskState = "failed"
	TaskCancelled TaskState = "cancelled"
)

// TaskTimeout is how long a task may stay queued or running without news
// before it fails (its owner may have gone). It is the default limit on a
// single git process.
const TaskTimeout = config.DefaultGitTimeout

// Task is an on-demand check of one repository.
type Task struct {
	ID         string            `json:"id"`
	Key        string            `json:"key"`
	State      TaskState         `json:"state"`
	Created    time.Time         `json:"created"`
	Started    time.Time         `json:"started,omitzero"`
	Finished   time.Time         `json:"finished,omitzero"`
	DurationMs int64             `json:"duration_ms,omitempty"` // from created to finished
	OldRefs    map[string]string `json:"old_refs,omitempty"`
	NewRefs    map[string]string `json:"new_refs,omitempty"`
	Error      string            `json:"error,omitempty"`
	// ErrorClass is Error's class, which anonymous readers see as Error.
	ErrorClass repostate.Class `json:"error_class,omitempty"`

	after     string    // the running task this one follows
	notBefore time.Time // the check starts no earlier (webhook pacing)
}

// Final tells whether the task has ended (done, failed or cancelled).
func (t Task) Final() bool {
	return t.State == TaskDone || t.State == TaskFailed || t.State == TaskCancelled
}

// TaskResult is the outcome of a check.
type TaskResult struct {
	Err              string          // empty: done
	Class            repostate.Class // Err's
	OldRefs, NewRefs map[string]string
	Cancelled        bool // the operator stopped it (Err says so)
}

// Tasks is the registry of on-demand checks. Requests for a repository
// coalesce: they join a queued task for it, and while one runs, they
// create or join a single follow-up, so that any burst of requests costs
// at most two checks. Finished tasks are kept, up to a bound, for their
// callers to read. It is safe for concurrent use.
type Tasks struct {
	clk  clock.Clock
	keep int

	mu       sync.Mutex
	byID     map[string]*task
	active   map[string][]*task // key -> its unfinished tasks, oldest first
	finished []string           // IDs of finished tasks, oldest first
}

type task struct {
	Task
	since time.Time // last progress: creation, start, or the end of the task it follows
	done  chan struct{}
	// hurry is closed when a request that is not paced joins a task
	// held back by pacing: its check starts without waiting further.
	hurry chan struct{}
}

// NewTasks returns a registry that keeps the last keep finished tasks
// (1000 if keep <= 0).
func NewTasks(clk clock.Clock, keep int) *Tasks {
	if keep <= 0 {
		keep = 1000
	}
	return &Tasks{clk: clk, keep: keep, byID: map[string]*task{}, active: map[string][]*task{}}
}

// Request asks for a check of key. It returns the queued task for key if
// there is one (isNew false); otherwise a new queued task (isNew true),
// which the caller must start, after the task it follows when that one is
// running.
func (t *Tasks) Request(key string) (Task, bool) {
	tk, isNew, _ := t.request(key, false, nil)
	return tk, isNew
}

// request is Request with a say on new tasks: admit, asked only for a
// task that would be new, given the time, says when its check may start
// and may refuse it (then no task is made and admit's error is
// returned). A paced request (a webhook's) may be held back that way; the
// requests that come meanwhile join that queued task, and Server.start
// holds the check until then, or until a request that is not paced (an
// operator's) joins it.
func (t *Tasks) request(key string, paced bool, admit func(now time.Time) (time.Time, error)) (Task, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clk.Now()
	var running *task
	for _, tk := range t.active[key] {
		t.expireLocked(tk, now)
	}
	for _, tk := range t.active[key] {
		switch tk.State {
		case TaskQueued:
			if !paced && !tk.notBefore.IsZero() {
				tk.notBefore = time.Time{} // an operator's request is not paced
				close(tk.hurry)
			}
			return tk.Task, false, nil
		case TaskRunning:
			running = tk
		}
	}
	var notBefore time.Time
	if admit != nil {
		nb, err := admit(now)
		if err != nil {
			return Task{}, false, err
		}
		if nb.After(now) {
			notBefore = nb
		}
	}
	tk := &task{Task: Task{ID: newTaskID(), Key: key, State: TaskQueued, Created: now}, since: now,
		done: make(chan struct{}), hurry: make(chan struct{})}
	if running != nil {
		tk.after = running.ID
	}
	tk.notBefore = notBefore
	t.byID[tk.ID] = tk
	t.active[key] = append(t.active[key], tk)
	return tk.Task, true, nil
}

// hurried returns a channel that is closed when task id need no longer
// wait for its pacing (nil for an unknown task: it never closes).
func (t *Tasks) hurried(id string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tk := t.byID[id]; tk != nil {
		return tk.hurry
	}
	return nil
}

// Running records that the check of task id has started.
func (t *Tasks) Running(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk := t.byID[id]
	if tk == nil || tk.State != TaskQueued {
		return
	}
	now := t.clk.Now()
	tk.State, tk.Started, tk.since = TaskRunning, now, now

}

// Finish records the result of task id. Later calls for the same task are
// ignored.
func (t *Tasks) Finish(id string, r TaskResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tk := t.byID[id]; tk != nil && !tk.Final() {
		t.finishLocked(tk, r, t.clk.Now())
	}
}

func (t *Tasks) finishLocked(tk *task, r TaskResult, now time.Time) {
	tk.State = TaskDone
	if r.Err != "" {
		tk.State = TaskFailed
	}
	if r.Cancelled {
		tk.State = TaskCancelled
	}
	tk.Finished, tk.Error, tk.OldRefs, tk.NewRefs = now, r.Err, r.OldRefs, r.NewRefs
	if r.Err != "" {
		tk.ErrorClass = r.Class.OrOther()
	}
	tk.DurationMs = now.Sub(tk.Created).Milliseconds()
	close(tk.done)

	var rest []*task // a new slice: callers may be ranging over the old one
	for _, o := range t.active[tk.Key] {
		if o == tk {
			continue
		}
		if o.after == tk.ID {
			o.since = now // its wait for us is over: its own time starts
		}
		rest = append(rest, o)
	}
	if len(rest) == 0 {
		delete(t.active, tk.Key)
	} else {
		t.active[tk.Key] = rest
	}

	t.finished = append(t.finished, tk.ID)
	for len(t.finished) > t.keep {
		delete(t.byID, t.finished[0])
		t.finished = t.finished[1:]
	}
}

// expireLocked fails tk if it has had no news for TaskTimeout. A task
// that follows an unfinished one cannot expire before it.
func (t *Tasks) expireLocked(tk *task, now time.Time) {
	if tk.Final() {
		return
	}
	if prev := t.byID[tk.after]; prev != nil && !prev.Final() {
		t.expireLocked(prev, now)
		return // if prev just expired, tk's time starts now
	}
	if !now.Before(tk.since.Add(TaskTimeout)) {
		t.finishLocked(tk, TaskResult{Err: fmt.Sprintf("no result after %v: the node doing the check may have gone; try again", TaskTimeout),
			Class: repostate.ClassTimeout}, now)
	}
}

// deadlineLocked is when tk (or the task it waits for) expires if nothing
// happens before.
func (t *Tasks) deadlineLocked(tk *task) time.Time {
	if prev := t.byID[tk.after]; prev != nil && !prev.Final() {
		return t.deadlineLocked(prev)
	}
	return tk.since.Add(TaskTimeout)
}

// Get returns task id.
func (t *Tasks) Get(id string) (Task, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk := t.byID[id]
	if tk == nil {
		return Task{}, false
	}
	t.expireLocked(tk, t.clk.Now())
	return tk.Task, true
}

// Wait waits until task id is done or failed, or ctx ends; it returns the
// task's latest state either way (with ctx's error in the second case).
// An unknown task gives an error wrapping ErrNotFound.
func (t *Tasks) Wait(ctx context.Context, id string) (Task, error) {
	for {
		t.mu.Lock()
		tk := t.byID[id]
		if tk == nil {
			t.mu.Unlock()
			return Task{}, fmt.Errorf("task %s: %w", id, ErrNotFound)
		}
		now := t.clk.Now()
		t.expireLocked(tk, now)
		snap, deadline := tk.Task, t.deadlineLocked(tk)
		t.mu.Unlock()
		if snap.Final() {
			return snap, nil
		}
		select {
		case <-tk.done:
		case <-t.clk.After(deadline.Sub(now)):
		case <-ctx.Done():
			if latest, ok := t.Get(id); ok {
				snap = latest
			}
			return snap, ctx.Err()
		}
	}
}

// newTaskID returns 128 random bits in 22 URL-safe characters: the form
// task IDs have on the wire (clients may match it), hence not
// crypto/rand.Text's, which every other secret and ID of gitfleet uses.
func newTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}
